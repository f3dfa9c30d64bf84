"""Settings of the workbench, read from environment variables with safe embedded defaults.

The embedded default needs no server: SQLite (WAL, immediate transactions) and Celery over a
SQLite-file broker. ``DATABASE_URL`` and ``CELERY_BROKER_URL`` switch to PostgreSQL and Redis.
See ``.env.example`` for every variable.
"""

from __future__ import annotations

import secrets
import warnings
from datetime import timedelta
from pathlib import Path

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from workbench.env import env_bool, env_int, env_list, env_list_or_none, env_str

# Lets generic Django classes be subscripted at run time (``admin.ModelAdmin[Study]``) for mypy.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
# The SQLite file, the embedded broker and (embedded default) the media live here. Importing the settings
# creates no folder: whatever writes there first makes it (the SQLite backend's connection, the embedded
# broker's set-up, a saved file, collectstatic); docs/deploy.md, "What each process needs".
DATA_DIR = Path(env_str("WORKBENCH_DATA_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = env_bool("DJANGO_DEBUG", False)
# "production": several processes or machines share one database (docs/deploy.md, "Production
# settings"): DJANGO_SECRET_KEY must be given (with DEBUG off), nothing is generated per node, mail
# goes out by SMTP unless WORKBENCH_EMAIL_BACKEND says otherwise. Anything else (default "embedded"):
# `make run` and `make test` on one machine.
WORKBENCH_ENV = env_str("WORKBENCH_ENV", "embedded").strip().lower()
if WORKBENCH_ENV not in ("embedded", "production"):
    raise ImproperlyConfigured(f"WORKBENCH_ENV={WORKBENCH_ENV!r}: use embedded or production")
PRODUCTION = WORKBENCH_ENV == "production" and not DEBUG


def _secret_key() -> str:
    """DJANGO_SECRET_KEY; in production it must be given (every node signs sessions, password-reset
    links and CSRF tokens with it, so a key made up per node would sign everyone out on the next
    node). Embedded: a random key generated once and kept in DATA_DIR/secret_key (never in the code),
    the one thing importing the settings may write."""
    given = env_str("DJANGO_SECRET_KEY", "")
    if given:
        return given
    if PRODUCTION:
        raise ImproperlyConfigured(
            "WORKBENCH_ENV=production needs DJANGO_SECRET_KEY (the same long random value on every web "
            'node and worker); docs/deploy.md, "Production settings"'
        )
    path = DATA_DIR / "secret_key"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_results",
    "axes",
    "annotations",
    "findings",
    "generation",
    "labelling",
    "mitigation",
    "reports",
    "workbench",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "workbench.middleware.ApiNoStoreMiddleware",  # outside the rest: every /api/ answer, refusals too
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "workbench.middleware.RequestLimitsMiddleware",  # before anything reads the body (CSRF's check does)
    "django.contrib.messages.middleware.MessageMiddleware",
    "workbench.middleware.ParticipantScopeMiddleware",
    "workbench.middleware.DomainErrorMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "workbench.middleware.ContentSecurityPolicyMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: turns its lockout mark into the 429
]

ROOT_URLCONF = "workbench.urls"
WSGI_APPLICATION = "workbench.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------------------------
_DEFAULT_SQLITE = f"sqlite:///{DATA_DIR / 'workbench.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(env_str("DATABASE_URL", _DEFAULT_SQLITE), conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several annotators at once on the embedded default: WAL lets readers run beside the writer,
    # IMMEDIATE takes the write lock when a transaction starts (a claim never fails half-way with
    # "database is locked"), and the busy timeout makes the next writer wait instead of failing.
    # workbench/sqlite_backend queues writers on a kernel lock first, so the next one starts as soon as
    # the last commits instead of waking late from SQLite's busy back-off (docs/deploy.md, "SQLite").
    if env_bool("WORKBENCH_SQLITE_WRITE_QUEUE", True):
        DATABASES["default"]["ENGINE"] = "workbench.sqlite_backend"
    # Connections persist (as on PostgreSQL): opening one (Python functions registered, PRAGMAs run,
    # the write-lock file opened) cost 1-2 ms of CPU per request (docs/deploy.md, "SQLite").
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-workbench.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "annotations.User"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Argon2id (Django's recommended hasher, OWASP's parameters: common/sign_in.py) for every new or changed
# password; the others verify older hashes, which Django re-hashes with Argon2 at their owner's next sign-in.
PASSWORD_HASHERS = [
    "common.sign_in.WorkbenchArgon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
# Sign-in throttling (django-axes) on the sign-in page, the admin's and /api/auth/token/: after
# WORKBENCH_LOGIN_FAILURE_LIMIT failures, the account name and the address are each refused (429) for
# WORKBENCH_LOGIN_COOLOFF_MINUTES. common/sign_in.py gives the address and the message.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out client before a password is hashed
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = env_bool("WORKBENCH_LOGIN_LOCKOUT", True)
AXES_FAILURE_LIMIT = env_int("WORKBENCH_LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("WORKBENCH_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each on its own: an account, or an address
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False  # a lockout ends on time, whatever is tried meanwhile
AXES_LOCKOUT_CALLABLE = "common.sign_in.lockout_response"
AXES_CLIENT_IP_CALLABLE = "common.sign_in.client_ip"
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False
# Password reset ("Forgot your password?"): at most this many requests per client address, and per email
# address, in each window (429 past it; 0: no limit); the mail is sent by a Celery task after the answer
# (docs/security.md, "Password reset"). Counted in Django's cache.
WORKBENCH_PASSWORD_RESET_LIMIT = env_int("WORKBENCH_PASSWORD_RESET_LIMIT", 15)
WORKBENCH_PASSWORD_RESET_WINDOW_MINUTES = env_int("WORKBENCH_PASSWORD_RESET_WINDOW_MINUTES", 15)
# An API token is refused (401) this many days after it was made; making a new one replaces it. A
# password change or reset, deactivation or a role change ends it at once (docs/api.md, "Authentication").
WORKBENCH_API_TOKEN_DAYS = env_int("WORKBENCH_API_TOKEN_DAYS", 30)
# The fewest people-labelled items a PPI row is estimated from (docs/metrics.md, "Valid ranges").
WORKBENCH_PPI_MIN_PEOPLE = env_int("WORKBENCH_PPI_MIN_PEOPLE", 10)
if WORKBENCH_API_TOKEN_DAYS < 1:
    raise ImproperlyConfigured(
        f"WORKBENCH_API_TOKEN_DAYS must be at least 1 (a token's lifetime), not {WORKBENCH_API_TOKEN_DAYS}"
    )
# Reverse proxies in front of the app that append to X-Forwarded-For (nginx: 1). 0: REMOTE_ADDR is the client.
WORKBENCH_TRUSTED_PROXIES = env_int("WORKBENCH_TRUSTED_PROXIES", 0)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "staticfiles"  # made by collectstatic
# WhiteNoise warns when STATIC_ROOT does not exist yet; the finders serve static files then.
warnings.filterwarnings("ignore", message="No directory at: ", category=UserWarning)
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_ROOT = Path(env_str("WORKBENCH_MEDIA_ROOT", str(DATA_DIR / "media")))
MEDIA_URL = "/media-not-served/"  # item files are served only through access-checked views
STORAGES = {
    # The filesystem (MEDIA_ROOT), or django-storages' S3 backend when WORKBENCH_S3_BUCKET is set:
    # common/file_storage.py chooses when the storage is made, from the S3_* settings below.
    "default": {"BACKEND": "common.file_storage.storage_from_settings"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Object storage (docs/deploy.md, "Object storage"): WORKBENCH_S3_BUCKET set = item files, display
# images and exports live in that S3-compatible bucket (AWS S3, MinIO, Ceph RGW...); credentials come
# through boto3's own AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY. Unset: the local filesystem.
S3_BUCKET = env_str("WORKBENCH_S3_BUCKET", "")
S3_ENDPOINT_URL = env_str("WORKBENCH_S3_ENDPOINT_URL", "")
S3_REGION = env_str("WORKBENCH_S3_REGION", "")
S3_ADDRESSING_STYLE = env_str("WORKBENCH_S3_ADDRESSING_STYLE", "")  # "path" or "virtual"; "" = boto3's
# Item images and export downloads: "redirect" (after the access check, a 302 to a presigned URL that
# lives S3_URL_TTL_SECONDS, at most 300) or "proxy" (the bytes stream through Django).
S3_SERVE = env_str("WORKBENCH_S3_SERVE", "redirect")
if S3_SERVE not in ("redirect", "proxy"):
    raise ImproperlyConfigured(f"WORKBENCH_S3_SERVE must be 'redirect' or 'proxy', not {S3_SERVE!r}")
S3_URL_TTL_SECONDS = env_int("WORKBENCH_S3_URL_TTL_SECONDS", 300)
if not 1 <= S3_URL_TTL_SECONDS <= 300:
    raise ImproperlyConfigured(
        f"WORKBENCH_S3_URL_TTL_SECONDS must be 1 to 300 (a presigned URL lives at most 5 minutes), "
        f"not {S3_URL_TTL_SECONDS}"
    )
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- Security -----------------------------------------------------------------------------------
# Behind HTTPS, docs/deploy.md sets every DJANGO_SECURE_* below; `manage.py check --deploy` is then
# clean (tests/test_deploy_check.py runs it with the documented values).
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", False)  # true behind HTTPS
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SECURE_REDIRECT_EXEMPT = [r"^healthz/$"]  # a load balancer's health check may use plain HTTP
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
# The proxy that ends TLS says so in X-Forwarded-Proto (it must overwrite what a client sends).
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", False) else None
)
SILENCED_SYSTEM_CHECKS = env_list("DJANGO_SILENCED_SYSTEM_CHECKS", [])
# A body that is not an upload (forms, JSON) may be this large; uploads are held in memory up to
# FILE_UPLOAD_MAX_MEMORY_SIZE, then in a temporary file (docs/security.md, "Request and upload size").
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("WORKBENCH_MAX_BODY_MB", 10) * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = env_int("WORKBENCH_UPLOAD_MEMORY_MB", 5) * 1024 * 1024
# Files the storage writes (item files, exports) and its folders: the workbench's account only.
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700

# --- Workbench limits ---------------------------------------------------------------------------
WORKBENCH_MAX_UPLOAD_BYTES = env_int("WORKBENCH_MAX_UPLOAD_MB", 200) * 1024 * 1024
# What a client who is not signed in may send (the sign-in and join forms): no upload, no larger body.
WORKBENCH_MAX_ANONYMOUS_BODY_BYTES = env_int("WORKBENCH_MAX_ANONYMOUS_BODY_KB", 64) * 1024
WORKBENCH_MAX_IMAGE_BYTES = env_int("WORKBENCH_MAX_IMAGE_MB", 40) * 1024 * 1024
WORKBENCH_MAX_IMAGE_PIXELS = env_int("WORKBENCH_MAX_IMAGE_PIXELS", 50_000_000)
WORKBENCH_MAX_ARCHIVE_MEMBERS = env_int("WORKBENCH_MAX_ARCHIVE_MEMBERS", 100_000)
# Where the server may send requests a configuration points at (VLM labellers, prompt refinement):
# public addresses, and the host names, addresses and networks listed here (loopback, private and
# link-local ones only when listed; common/outbound.py, docs/security.md).
WORKBENCH_OUTBOUND_SCHEMES = env_list("WORKBENCH_OUTBOUND_SCHEMES", ["https", "http"])
WORKBENCH_OUTBOUND_ALLOWED_HOSTS = env_list("WORKBENCH_OUTBOUND_ALLOWED_HOSTS", [])
# The environment variables a labeller's api_key_env may name start with one of these prefixes.
WORKBENCH_LABELLER_KEY_ENV_PREFIXES = env_list(
    "WORKBENCH_LABELLER_KEY_ENV_PREFIXES", ["WORKBENCH_LABELLER_KEY_"]
)
WORKBENCH_EXPORT_INLINE_LIMIT = env_int("WORKBENCH_EXPORT_INLINE_LIMIT", 20_000)
# Uploads larger than this (all files of a request together) are stored and imported by a worker as
# an import job; smaller ones finish within the request (docs/import-export.md, "Imports as jobs").
WORKBENCH_IMPORT_INLINE_BYTES = env_int("WORKBENCH_IMPORT_INLINE_MB", 20) * 1024 * 1024
# ... and uploads of more rows than this (lines of a CSV/JSONL, objects of a JSON file; counted
# cheaply, bounded) are imported by a worker too, whatever their size: a 19 MB manifest of 900,000
# rows held a web worker for a minute (docs/import-export.md, "Imports as jobs").
WORKBENCH_IMPORT_INLINE_ROWS = env_int("WORKBENCH_IMPORT_INLINE_ROWS", 5_000)
# Where bucket addresses (s3://...) may point: entries "bucket" or "bucket/prefix/", the prefix may
# name {study} or {user} (ids). Imports read under WORKBENCH_S3_IMPORT_BUCKETS, exports write under
# WORKBENCH_S3_EXPORT_BUCKETS (unset: the import entries). None by default, and never the storage's
# own folders (annotations/interchange/bucket_addresses.py; docs/security.md, "Buckets by tenant").
WORKBENCH_S3_IMPORT_BUCKETS = env_list("WORKBENCH_S3_IMPORT_BUCKETS", [])
WORKBENCH_S3_EXPORT_BUCKETS = env_list_or_none("WORKBENCH_S3_EXPORT_BUCKETS")
# Local model folders that pages and the API may load (the command line may load any folder).
WORKBENCH_MODEL_DIRS = env_list("WORKBENCH_MODEL_DIRS", [str(DATA_DIR / "models")])
WORKBENCH_DEFAULT_LEASE_MINUTES = env_int("WORKBENCH_DEFAULT_LEASE_MINUTES", 30)

# --- Mail (password-reset links) ---------------------------------------------------------------
# Embedded default: no mail server; each message is a file under DATA_DIR/mail and the admin's
# "Send password-reset links" action shows the links it made. SMTP: WORKBENCH_EMAIL_BACKEND=
# django.core.mail.backends.smtp.EmailBackend and the EMAIL_* variables (docs/deploy.md).
# In production (WORKBENCH_ENV=production) SMTP is the default: a file would land on whichever node sent it.
EMAIL_BACKEND = env_str(
    "WORKBENCH_EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if PRODUCTION
    else "django.core.mail.backends.filebased.EmailBackend",
)
EMAIL_FILE_PATH = DATA_DIR / "mail"  # the file backend makes the folder at its first message
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)  # STARTTLS (usually port 587)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)  # TLS from the first byte (usually port 465)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL exclude each other: set one")
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)  # seconds: a mail server that hangs never holds a request
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "workbench@localhost")

# --- Cache ---------------------------------------------------------------------------------------
# WORKBENCH_CACHE_URL (redis://HOST:6379/DB, rediss://...) = one cache shared by every web node and
# worker: API throttles, the task page's item counts, findings and quality reports, and token
# revocation (a revoked API token is refused at once on every node; docs/api.md, "Authentication").
# Unset (the embedded default): each process keeps its own in memory (docs/deploy.md, "Shared cache").
CACHE_URL = env_str("WORKBENCH_CACHE_URL", "").strip()
if CACHE_URL and not CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(f"WORKBENCH_CACHE_URL must be a redis:// or rediss:// URL, not {CACHE_URL!r}")
CACHES: dict[str, dict[str, object]] = {
    "default": (
        {
            "BACKEND": "common.redis_cache.RedisCache",  # Django's, one client per pool
            "LOCATION": CACHE_URL,
            "KEY_PREFIX": "workbench",
            # A Redis that stops answering fails a request within seconds instead of holding it.
            "OPTIONS": {"socket_connect_timeout": 5, "socket_timeout": 5},
        }
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "workbench"}
    )
}
WORKBENCH_SHARED_CACHE = bool(CACHE_URL)

# --- REST API -----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: an anonymous request then gets 401 with WWW-Authenticate, not 403.
        "annotations.api.authentication.WorkbenchTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON bodies through common.checked_input (depth, finite numbers, no null characters): a 400, not 500.
    "DEFAULT_PARSER_CLASSES": [
        "annotations.api.parsers.CheckedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    # Relations filter by id on the user's own rows: no existence leak (annotations/api/filters.py).
    "DEFAULT_FILTER_BACKENDS": ["annotations.api.filters.ScopedFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "annotations.api.errors.exception_handler",
    # Fixed-window counters, one increment per request (annotations/api/throttling.py; DRF's own keep a
    # list of request times: a read and a write of it per request).
    "DEFAULT_THROTTLE_CLASSES": [
        "annotations.api.throttling.AnonRateThrottle",
        "annotations.api.throttling.UserRateThrottle",
    ],
    "NUM_PROXIES": WORKBENCH_TRUSTED_PROXIES or None,
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_str("WORKBENCH_THROTTLE_ANON", "60/minute"),
        "user": env_str("WORKBENCH_THROTTLE_USER", "6000/minute"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Stereotype Audit Workbench API",
    "DESCRIPTION": "Studies, items, annotations (human and machine), import and export.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema maps every endpoint and field: for signed-in accounts only (docs/security.md, "API schema").
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No link inside each operation's toggle button (axe: nested-interactive); the toggles still open.
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "StudyStatusEnum": "annotations.models.Study.Status",
        "ControlKindEnum": "annotations.models.ControlKind",
        "JobStatusEnum": "common.jobs.BackgroundJob.Status",  # every background job shares these choices
    },
}

# --- Celery ---------------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", f"sqla+sqlite:///{DATA_DIR / 'celery-broker.sqlite3'}")
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", "django-db")
CELERY_RESULT_EXTENDED = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "celery"
# Diffusers and local-model work run on their own queue, so GPU workers take only that.
CELERY_TASK_ROUTES = {"generation.tasks.generate_*": {"queue": "gpu"}}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker that dies (docs/deploy.md, "When a worker dies"): a running job's worker stamps its
# heartbeat every fifth of this; a RUNNING job whose heartbeat is older than this many seconds is
# taken over and resumed. Every worker sweeps for such jobs this often (0: never; run
# `manage.py resume_stale_jobs` from cron instead).
WORKBENCH_JOB_STALE_SECONDS = env_int("WORKBENCH_JOB_STALE_SECONDS", 120)
WORKBENCH_JOB_SWEEP_SECONDS = env_int("WORKBENCH_JOB_SWEEP_SECONDS", 60)
# The same sweep refits a `posterior` overlap policy's model once its study has collected this many
# submitted judgements since the last fit (docs/overlap.md, "Refits in the background"; 0: only when a
# researcher saves the policy or presses Refit).
WORKBENCH_OVERLAP_REFIT_EVERY = env_int("WORKBENCH_OVERLAP_REFIT_EVERY", 100)
# The claim and submit statements are prepared once per PostgreSQL connection (common/statement_cursor.py);
# off for a pooler that cannot keep a session's prepared statements (PgBouncer's transaction mode < 1.21).
WORKBENCH_PG_PREPARED_STATEMENTS = env_bool("WORKBENCH_PG_PREPARED_STATEMENTS", True)
# A worker that hangs (its keep-alive thread still beats, the run makes no step): a RUNNING job whose
# last step (a batch, a file, a row: common/jobs.py) is older than this is taken over like a lost
# worker's. It must exceed the longest single step, a model's first load included. 0: no deadline.
WORKBENCH_JOB_PROGRESS_DEADLINE_SECONDS = env_int("WORKBENCH_JOB_PROGRESS_DEADLINE_SECONDS", 3600)
# Redis gives an unacknowledged task (its worker died) to another worker after this many seconds;
# a task given twice is harmless (claims are compare-and-set). The SQLite broker never gives a task
# twice: the sweep above resumes those jobs.
WORKBENCH_BROKER_VISIBILITY_TIMEOUT = env_int("WORKBENCH_BROKER_VISIBILITY_TIMEOUT", 900)
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": WORKBENCH_BROKER_VISIBILITY_TIMEOUT,
        # look for such tasks every quarter of the timeout (at most every 10 s), not every 100 s
        "unacked_restore_interval": max(1, min(10, WORKBENCH_BROKER_VISIBILITY_TIMEOUT // 4)),
        "unacked_restore_throttle": 1,
    }
CELERY_TIMEZONE = TIME_ZONE

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("WORKBENCH_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

# --- Published data (ViSAGe, SeeGULL) beside the repository, for the reproduction test and demos ----
WORKBENCH_SHARED_DATA = Path(env_str("WORKBENCH_SHARED_DATA", str(BASE_DIR.parent / "shared" / "data")))

# --- Findings: the fewest settled items (every judgement the overlap asks for) a study's findings may rest
# on before its findings page, compare and API say "too few" at the top (docs/metrics.md, "Settled,
# partial, pending"). 30: below it a share's 95% interval is wider than +/-0.18, larger than the
# differences these papers report.
WORKBENCH_FINDINGS_MIN_ITEMS = env_int("WORKBENCH_FINDINGS_MIN_ITEMS", 30)
