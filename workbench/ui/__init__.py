"""Streamlit-only helpers for `app.py` and `pages/` (the only place besides them that imports streamlit).

Everything a notebook or the CLI could also use lives in the library (`session.py`, `render/`);
these modules only lay widgets out.
"""
