# aoti-guard/torch:2.13.0-cpu-py311 = aoti-guard/base + venv /opt/venv with the
# torch 2.13.0 CPU wheel and its runtime deps (plus numpy, see NOTES.md).
# Built by scripts/docker/build_base_image.sh with the legacy builder and
# --network none: every wheel comes from the build context (wheels/).
# Two stages so that the ~200 MB of wheels is not a layer of the final image.
ARG BASE=aoti-guard/base:bookworm-py311
FROM ${BASE} AS build
LABEL aoti-guard.stage=build
COPY wheels /wheels
COPY torch-requirements.txt /wheels/requirements.txt
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels \
        --disable-pip-version-check -r /wheels/requirements.txt \
 && /opt/venv/bin/python -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"

FROM ${BASE}
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    VIRTUAL_ENV=/opt/venv
CMD ["python3"]
