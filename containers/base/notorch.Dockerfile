# aoti-guard/notorch:bookworm-py311 = aoti-guard/base + an empty venv at
# /opt/venv first on PATH: the same layout as the torch image, but
# `python3 -c "import torch"` fails with ModuleNotFoundError.
ARG BASE=aoti-guard/base:bookworm-py311
FROM ${BASE}
RUN python3 -m venv --without-pip /opt/venv \
 && /opt/venv/bin/python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)"
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    VIRTUAL_ENV=/opt/venv
CMD ["python3"]
