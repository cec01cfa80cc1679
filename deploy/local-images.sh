#!/usr/bin/env bash
# Builds every image of docker-compose.yml with podman from a Debian base bootstrapped on this machine,
# for hosts that reach Debian's package mirror, PyPI and Maven Central but no image registry.
#
#   bash deploy/local-images.sh            # installs what is missing, then builds (cached steps are skipped)
#   export CONTAINERS_CONF=$PWD/deploy/containers.conf
#   set -a && . deploy/local-images.env && set +a
#   podman-compose -p kafkette up -d --no-build zookeeper broker-1 broker-2 broker-3 prometheus
#
# Steps:
#   1. Debian's podman, podman-compose, runc, aardvark-dns and debootstrap, when missing (apt-get, as root);
#   2. the base image localhost/debian-base:bookworm: `debootstrap --variant=minbase` once, kept as a tar
#      under .cache/containers/ and imported with `podman import` whenever podman's store lacks it;
#   3. the images, each FROM that base through its build arg (the Dockerfiles default to public images):
#        localhost/kafkette:latest            deploy/Dockerfile, target broker   (PYTHON_IMAGE)
#        localhost/kafkette-pipeline:latest   deploy/Dockerfile, target pipeline (PYTHON_IMAGE)
#        localhost/kafkette-zookeeper:3.8     deploy/zookeeper/Dockerfile         (BASE_IMAGE)
#        localhost/kafkette-prometheus:latest deploy/prometheus/Dockerfile        (BASE_IMAGE)
#      Grafana has no Debian package: it is skipped (its compose service needs grafana/grafana).
#
# Podman is pointed at deploy/containers.conf through CONTAINERS_CONF; nothing is written under /etc.
# Environment: KAFKETTE_BASE_IMAGE (default localhost/debian-base:bookworm), DEBIAN_MIRROR
# (default http://deb.debian.org/debian), IMAGES (default "broker pipeline zookeeper prometheus").
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$REPO/.cache/containers"
BASE_IMAGE="${KAFKETTE_BASE_IMAGE:-localhost/debian-base:bookworm}"
SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
IMAGES="${IMAGES:-broker pipeline zookeeper prometheus}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$REPO/deploy/containers.conf}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
log() { echo "local-images: $*" >&2; }

mkdir -p "$CACHE"
# One build at a time on this checkout (the compose test and a person may both run this).
exec 8>"$CACHE/.local-images.lock"
flock 8

# --- 1. Packages --------------------------------------------------------------------------------------
need=()
for pkg in podman podman-compose runc aardvark-dns debootstrap; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # netavark and iptables: podman's bridge networks and published ports; the rest are podman's
  # recommendations that rootless use needs.
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" netavark iptables uidmap slirp4netns \
    fuse-overlayfs >&2
fi

# --- 2. The Debian base image ---------------------------------------------------------------------------
BASE_TAR="$CACHE/debian-$SUITE-minbase.tar"
if [ ! -s "$BASE_TAR" ]; then
  rootfs="$CACHE/rootfs-$SUITE"
  if [ ! -f "$rootfs/.debootstrap-complete" ]; then
    log "debootstrap --variant=minbase $SUITE from $MIRROR (once; cached in $BASE_TAR)"
    $SUDO rm -rf "$rootfs"
    $SUDO nice -n 10 debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$rootfs" "$MIRROR" \
      >"$CACHE/debootstrap.log" 2>&1 || { tail -n 30 "$CACHE/debootstrap.log" >&2; exit 1; }
    $SUDO touch "$rootfs/.debootstrap-complete"
  fi
  # What Debian's official images set up for containers: services never start during a build, no
  # package caches, the security and updates suites.
  $SUDO tee "$rootfs/usr/sbin/policy-rc.d" >/dev/null <<'EOF'
#!/bin/sh
exit 101
EOF
  $SUDO chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
  $SUDO tee "$rootfs/etc/apt/sources.list" >/dev/null <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian}/debian-security $SUITE-security main
EOF
  $SUDO tee "$rootfs/etc/apt/apt.conf.d/docker-clean" >/dev/null <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; };
APT::Install-Recommends "false";
EOF
  # Certificate authorities this host trusts beyond Debian's set (a TLS-inspecting egress proxy, a
  # company CA) are trusted inside the images too, or pip and Maven could not reach their registries.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    $SUDO cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    $SUDO chroot "$rootfs" update-ca-certificates >/dev/null
  fi
  # pip uses its own CA bundle unless told otherwise; Debian's bundle includes the host's additions.
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' | $SUDO tee "$rootfs/etc/pip.conf" >/dev/null
  $SUDO rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs/.debootstrap-complete"
  log "packing $rootfs into $BASE_TAR"
  $SUDO tar --numeric-owner -C "$rootfs" -cf "$BASE_TAR.tmp" .
  mv "$BASE_TAR.tmp" "$BASE_TAR"
  $SUDO rm -rf "$rootfs"
fi
if ! podman image exists "$BASE_IMAGE"; then
  log "importing $BASE_TAR as $BASE_IMAGE"
  podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["bash"]' \
    "$BASE_TAR" "$BASE_IMAGE" >/dev/null
fi

# --- 3. The images ----------------------------------------------------------------------------------------
build() {
  local tag="$1"; shift
  log "building $tag"
  # --pull=never: every FROM is local. --network host: RUN steps reach the package registries the way
  # the host does. The runtime (runc) comes from containers.conf.
  nice -n 10 podman build --network host --pull=never -t "$tag" "$@" >&2
}
for image in $IMAGES; do
  case "$image" in
    broker)
      build localhost/kafkette:latest -f "$REPO/deploy/Dockerfile" --target broker \
        --ignorefile "$REPO/deploy/Dockerfile.dockerignore" \
        --build-arg PYTHON_IMAGE="$BASE_IMAGE" "$REPO" ;;
    pipeline)
      build localhost/kafkette-pipeline:latest -f "$REPO/deploy/Dockerfile" --target pipeline \
        --ignorefile "$REPO/deploy/Dockerfile.dockerignore" \
        --build-arg PYTHON_IMAGE="$BASE_IMAGE" "$REPO" ;;
    zookeeper)
      build localhost/kafkette-zookeeper:3.8 -f "$REPO/deploy/zookeeper/Dockerfile" \
        --build-arg BASE_IMAGE="$BASE_IMAGE" "$REPO/deploy/zookeeper" ;;
    prometheus)
      build localhost/kafkette-prometheus:latest -f "$REPO/deploy/prometheus/Dockerfile" \
        --build-arg BASE_IMAGE="$BASE_IMAGE" "$REPO/deploy/prometheus" ;;
    grafana)
      log "grafana: Debian has no grafana package; the stack runs without it (or with grafana/grafana)" ;;
    *)
      log "unknown image '$image' (broker, pipeline, zookeeper, prometheus)"; exit 2 ;;
  esac
done
log "done: $(podman images --format '{{.Repository}}:{{.Tag}}' | grep -E 'kafkette|debian-base' | sort | tr '\n' ' ')"
