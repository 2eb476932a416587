"""The launcher: a cluster's spec and config, the state store, the UI and the one
per-node command builder; the targets beneath it (``targets/``) make machines appear, and
``deploy``/``grow``/``preflight`` drive them.  Never imports the node runtime."""
