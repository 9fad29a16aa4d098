"""The web app: the server (`serve`, `gate`, `auth`, `nvml`), the Streamlit entry point (`app`) and
its page registry (`pages`), views, page builders (`reports`), renderers, charts and static files."""
