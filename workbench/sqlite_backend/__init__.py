"""Django's SQLite backend with a fair, cross-process write lock (``ENGINE = "workbench.sqlite_backend"``)."""
