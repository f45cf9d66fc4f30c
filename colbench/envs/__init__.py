"""Gymnasium environments of ColBench, one subpackage per domain."""
