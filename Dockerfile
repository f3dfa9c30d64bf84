# One image for every process of compose.yaml: web nodes (gunicorn), CPU and GPU workers (Celery).
# The GPU worker's image is built with a CUDA build of torch:
#   docker compose build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 worker-gpu
# A pinned base (docs/deploy.md, "Docker Compose": upgrading the images); tests/test_compose.py checks it.
FROM python:3.11.13-slim-bookworm

ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    WORKBENCH_DATA_DIR=/app/var HF_HOME=/app/var/hf

RUN apt-get update \
 && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 poppler-utils libpango-1.0-0 libpangoft2-1.0-0 \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt ./
RUN pip install --no-cache-dir --index-url "$TORCH_INDEX_URL" torch==2.13.0 \
 && pip install --no-cache-dir -r requirements.txt \
 && pip install --no-cache-dir --no-deps rapidocr-onnxruntime==1.4.4

COPY . .
# Static files are collected into the image (WhiteNoise serves them); nothing else is written here.
RUN DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput -v0 \
 && useradd --uid 1000 --create-home workbench && mkdir -p /app/var/hf && chown -R workbench /app/var

USER workbench
EXPOSE 8000
# gthread workers (4 x 4 threads; about two workers a core), keep-alive longer than nginx's idle
# upstream connections so nginx closes them first (docs/deploy.md, "Web server"; measured in
# docs/benchmarks.md, "Claim path at the limit").
CMD ["gunicorn", "workbench.wsgi", "--bind", "0.0.0.0:8000", "--workers", "4", "--threads", "4", \
     "--keep-alive", "75", \
     "--timeout", "120", "--limit-request-line", "8190", "--limit-request-fields", "100", \
     "--limit-request-field_size", "8190"]
