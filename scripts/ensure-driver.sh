#!/usr/bin/env bash
# Sourced by the other scripts: makes sure a Vulkan driver exists. On Debian/Ubuntu without one it installs Mesa's
# lavapipe (a CPU Vulkan driver) and the EGL/GL pieces for llvmpipe; elsewhere it says what to install.
have_vulkan_icd() {
  local dir
  for dir in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d; do
    compgen -G "$dir/*.json" >/dev/null && return 0
  done
  [ -n "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ]
}

if ! have_vulkan_icd || ! ldconfig -p 2>/dev/null | grep -q 'libEGL_mesa.so.0'; then
  packages="mesa-vulkan-drivers libvulkan1 libegl1 libegl-mesa0 libgl1-mesa-dri"
  if command -v apt-get >/dev/null; then
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "installing a Vulkan driver (lavapipe) and Mesa's EGL: $packages" >&2
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $packages >/dev/null
  elif ! have_vulkan_icd; then
    echo "No Vulkan driver found. Install your GPU vendor's driver, or Mesa's lavapipe (mesa-vulkan-drivers on" >&2
    echo "Debian/Ubuntu, mesa-vulkan-drivers on Fedora, vulkan-swrast on Arch); on macOS wgpu uses Metal." >&2
  fi
fi

command -v cargo >/dev/null || { echo "cargo not found: install Rust from https://rustup.rs" >&2; exit 1; }
# Mesa complains on every start when this is unset; give it a private directory.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d); export XDG_RUNTIME_DIR
fi
