FROM python:3.11-slim
WORKDIR /app
# The fonts of the PDF tickets and badges (EVENT_PDF_FONTS' default; check events.E005).
RUN apt-get update \
    && apt-get install -y --no-install-recommends fonts-dejavu-core fonts-noto-core fonts-wqy-microhei \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml ./
COPY . .
RUN pip install --no-cache-dir . && python -m compileall -q /app
# The translation catalogs (locale/), compiled in the image: no settings needed for this.
RUN apt-get update && apt-get install -y --no-install-recommends gettext \
    && rm -rf /var/lib/apt/lists/* && django-admin compilemessages --ignore=.venv
