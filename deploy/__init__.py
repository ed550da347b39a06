"""The multi-replica deployment recipe: nginx, N Streamlit replicas, one PostgreSQL (see deploy/README.md)."""
