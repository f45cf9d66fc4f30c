"""The backend (Python function) domain: environment and its prompt templates."""
