# The init image: static wrapper-server and health probe, nothing else.
# No shell, no libc. Build the binaries first (this machine cannot pull a
# Rust builder image, and the binaries are static anyway):
#
#   cargo build --profile dist --target x86_64-unknown-linux-gnu -p wrapper-server -p health-probe --bins
#   docker build -t wrapper-server:dev -f Dockerfile target/x86_64-unknown-linux-gnu/dist
#
# Used two ways:
# - our pod template: init container `/wrapper-server install /wrapper-server-tools`
#   (the default entrypoint below);
# - as Porch's WRAPPER_SERVER_IMAGE, whose template runs
#   `cp -a /home/nonroot/wrapper-server/. /wrapper-server-tools`: /bin/cp is
#   wrapper-server itself, acting as a minimal cp under that name.
FROM scratch
COPY wrapper-server /wrapper-server
COPY health-probe /health-probe
COPY wrapper-server /bin/cp
COPY wrapper-server /home/nonroot/wrapper-server/wrapper-server
COPY health-probe /home/nonroot/wrapper-server/health-probe
COPY health-probe /home/nonroot/wrapper-server/grpc-health-probe
USER 65532:65532
ENTRYPOINT ["/wrapper-server", "install", "/wrapper-server-tools"]
