"""The seed's HTTP API (seed 000 §1): FastAPI over the shared store and the same ``core`` diagnosis flow.

Run: ``uvicorn api.main:app --port 8000`` (OpenAPI page at ``/docs``).
"""
