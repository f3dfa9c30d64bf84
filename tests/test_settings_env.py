"""Settings for machines that are not the embedded one (issue 28, point 4): production needs an explicit
secret key, SMTP is configurable (SSL, timeout), the shared cache comes from WORKBENCH_CACHE_URL, and
importing the settings creates no folder. Each case imports the settings in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json
from django.conf import settings
settings.INSTALLED_APPS  # import the settings module, nothing else (no django.setup)
print(json.dumps({"cache": settings.CACHES["default"]["BACKEND"], "shared": settings.WORKBENCH_SHARED_CACHE,
                  "mail": settings.EMAIL_BACKEND, "ssl": settings.EMAIL_USE_SSL,
                  "timeout": settings.EMAIL_TIMEOUT, "production": settings.PRODUCTION}))
"""


def settings_in(tmp_path: Path, **given: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKBENCH_", "DJANGO_", "EMAIL_"))}
    env.pop("DATABASE_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    env |= {"DJANGO_SETTINGS_MODULE": "workbench.settings", "WORKBENCH_DATA_DIR": str(tmp_path / "data")}
    env |= given
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def seen(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert result.returncode == 0, result.stderr[-2000:]
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_production_refuses_to_start_without_a_secret_key(tmp_path) -> None:
    refused = settings_in(tmp_path, WORKBENCH_ENV="production")
    assert refused.returncode != 0 and "WORKBENCH_ENV=production needs DJANGO_SECRET_KEY" in refused.stderr
    assert not (tmp_path / "data").exists()  # and wrote no key of its own
    started = seen(settings_in(tmp_path, WORKBENCH_ENV="production", DJANGO_SECRET_KEY="k" * 50))
    assert started["production"] is True
    assert started["mail"] == "django.core.mail.backends.smtp.EmailBackend"  # no files on one node
    assert not (tmp_path / "data").exists()  # importing the settings made no folder
    bad = settings_in(tmp_path, WORKBENCH_ENV="prod")
    assert bad.returncode != 0 and "use embedded or production" in bad.stderr


def test_the_embedded_default_keeps_its_generated_key_and_local_cache(tmp_path) -> None:
    first = seen(settings_in(tmp_path))
    assert first["production"] is False and first["shared"] is False
    assert first["cache"] == "django.core.cache.backends.locmem.LocMemCache"
    assert first["mail"] == "django.core.mail.backends.filebased.EmailBackend"
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["secret_key"]  # nothing else
    assert oct((tmp_path / "data" / "secret_key").stat().st_mode & 0o777) == "0o600"


def test_the_shared_cache_and_smtp_come_from_the_environment(tmp_path) -> None:
    shared = seen(
        settings_in(
            tmp_path,
            WORKBENCH_CACHE_URL="redis://127.0.0.1:6379/1",
            EMAIL_USE_SSL="true",
            EMAIL_TIMEOUT="7",
        )
    )
    assert shared["cache"] == "common.redis_cache.RedisCache" and shared["shared"] is True
    assert (shared["ssl"], shared["timeout"]) == (True, 7)
    both = settings_in(tmp_path, EMAIL_USE_SSL="true", EMAIL_USE_TLS="true")
    assert both.returncode != 0 and "EMAIL_USE_TLS and EMAIL_USE_SSL exclude each other" in both.stderr
    wrong = settings_in(tmp_path, WORKBENCH_CACHE_URL="memcached://127.0.0.1:11211")
    assert wrong.returncode != 0 and "must be a redis:// or rediss:// URL" in wrong.stderr


def test_a_fresh_data_folder_is_made_by_the_first_database_connection(tmp_path) -> None:
    """`make run` from a fresh clone: the settings make no folder, the SQLite backend makes the
    database's at its first connection and the start-up hook the embedded broker's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKBENCH_", "DJANGO_"))}
    env.pop("DATABASE_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    data = tmp_path / "fresh" / "var"
    env |= {"WORKBENCH_DATA_DIR": str(data), "DJANGO_SECRET_KEY": "k" * 50}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
    )
    assert (data / "workbench.sqlite3").is_file()
