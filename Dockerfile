# syntax=docker/dockerfile:1
# credrank: the CLI and `credrank serve`, with MiniLM served by onnxruntime (the artifact is
# exported here, at build time, from the packaged weights: nothing is fetched from a model hub).
#
#   docker build -t credrank .
#   docker run --rm credrank --version
#   docker run --rm -p 8000:8000 -v "$PWD/idx:/data/idx" credrank \
#       serve --index /data/idx --host 0.0.0.0
#
# compose.yaml runs `credrank serve` against a Qdrant server (the cluster path).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1
# torch from the CPU wheel index, pinned in every pip command that could pull it: the PyPI
# wheel for Linux is the CUDA build (several GB of nvidia packages)
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# the extras of the image: MiniLM (export + ONNX runtime), the HTTP service, a Qdrant server
ARG EXTRAS=embed,onnx,serve,qdrant
RUN python -m venv /opt/credrank
ENV PATH=/opt/credrank/bin:$PATH
RUN pip install --index-url "${TORCH_INDEX}" "torch==${TORCH_VERSION}"
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install "/src[${EXTRAS}]" "torch==${TORCH_VERSION}" \
    && python -m credrank.index.onnx_export \
    && credrank models info

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/credrank/bin:$PATH \
    HF_HUB_OFFLINE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --gid 10001 credrank \
    && useradd --create-home --uid 10001 --gid 10001 credrank \
    && mkdir -p /data/idx \
    && chown -R 10001:10001 /data
COPY --from=build /opt/credrank /opt/credrank
# /data/idx exists (owned by credrank) so that a named volume mounted there starts writable
USER 10001:10001
WORKDIR /data
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["credrank"]
CMD ["--help"]
