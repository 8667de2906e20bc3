"""The contract-knowledge interview (seeds 001 and 003)."""
