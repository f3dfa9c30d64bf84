"""The WSGI application (gunicorn imports it once in every worker).

After Django is set up, every view is imported (the URL resolver loads them lazily otherwise) and
everything loaded so far is frozen out of the garbage collector's reach (``gc.freeze``). A worker
holds some 200,000 objects once the app and its libraries are loaded; a full collection scans them
all and stops every thread of the worker meanwhile, which made the tail of the annotation latency
(docs/benchmarks.md). Frozen objects are never scanned; objects made while serving requests are
collected as usual.
"""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018 - imports every view now, before the freeze
gc.collect()  # what is already garbage goes first, so it is not kept forever
gc.freeze()
