"""The frontend (Tailwind web page) domain: environment, its page-seeing simulator and their prompt templates."""
