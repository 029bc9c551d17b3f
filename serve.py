"""The Provenance Workbench app as it should be served on a network: `streamlit run serve.py` (same flags as
`streamlit run app.py`). It is `app.py` itself, served through Streamlit's `st.App` with the workbench's guard in
front (`workbench.ui.closed_paths`): Streamlit's `/_stcore/metrics`, which Streamlit answers to anyone and cannot
turn off, is closed (docs/security.md, "Streamlit's own endpoints"). Everything else is Streamlit's, unchanged."""

import streamlit as st
from starlette.middleware import Middleware

from workbench.ui.closed_paths import ClosedPaths

app = st.App("app.py", middleware=[Middleware(ClosedPaths)])
