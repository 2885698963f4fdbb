"""The classroom load test (issue 34, item 2): `python -m bench.load`, `make load`.

- scenario.py: what one student does (first page, head switches, text changes, pages) and
  the checks after every step (no error; its own text, head and tokens; nobody else's).
- protocol.py: a Streamlit client without a browser (protobuf over /_stcore/stream).
  What it sends was taken from Chromium's own frames (Playwright's websocket events) on this
  app: the first run names the page (page_name) with the URL's query; later runs name the
  page's script hash, the query the server last wrote, every widget's value, the cached
  message hashes, and the widget's fragment for a widget inside an st.fragment; a page
  switch keeps only the sidebar's widgets and sends the query its sidebar link carries.
- browser.py: the same scenario in Playwright contexts of Debian's chromium (the pytest
  profile, tests/browser/test_load_browser.py).
- __main__.py: starts the server (one process, or `attention-lab serve --replicas N`),
  warms it, runs the sessions, reports latency per kind, errors, isolation, RSS and CPU.
"""
