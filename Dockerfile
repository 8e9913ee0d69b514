FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml ./
COPY . .
RUN pip install --no-cache-dir .
# The translation catalogs (locale/), compiled in the image: no settings needed for this.
RUN apt-get update && apt-get install -y --no-install-recommends gettext \
    && rm -rf /var/lib/apt/lists/* && django-admin compilemessages --ignore=.venv
