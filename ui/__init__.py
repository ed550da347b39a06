"""Streamlit helpers shared by the pages: small functions that draw widgets and return plain values."""
