"""The application core: a store and its analyses for every surface (`source`), multi-rank analysis
(`ranks`), where tasks run (`execute`, `threads`), the bench on a Ray cluster (`fleet`) and the textbook's
models on a stored run (`textbook`). No Streamlit, no page code."""
