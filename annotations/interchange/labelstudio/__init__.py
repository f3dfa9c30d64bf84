"""Label Studio 1.x: its labeling configs (``config.py``: XML <-> protocols), its JSON exports read into
a study (``importer.py``) and a study written as a zip Label Studio imports (``exporter.py``)."""
