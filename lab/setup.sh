# Set-up shared by ./course (the instructors' repository) and the student edition's ./course
# (edition/course): sourced, never run. Needs ROOT, VENV, PY and REQUIREMENTS set by the caller.
say() { printf '[course] %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi
}

APT_UPDATED=
apt_install() {  # apt_install PACKAGE... ; returns non-zero when apt is not usable here
    command -v apt-get >/dev/null 2>&1 || return 1
    if [ -z "$APT_UPDATED" ]; then as_root apt-get update -qq >/dev/null || return 1; APT_UPDATED=1; fi
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

ensure_system_tool() {  # ensure_system_tool COMMAND DEBIAN_PACKAGE HINT
    local cmd=$1 pkg=$2 hint=$3
    command -v "$cmd" >/dev/null 2>&1 && return 0
    say "installing Debian package '$pkg' (for '$cmd')"
    if apt_install "$pkg" && command -v "$cmd" >/dev/null 2>&1; then return 0; fi
    say "'$cmd' is missing and could not be installed here. $hint"
    return 1
}

setup_python() {
    if [ ! -x "$PY" ]; then
        say "creating virtual environment in $(basename "$VENV")"
        python3 -m venv "$VENV"
    fi
    local stamp
    stamp=$(cat "$REQUIREMENTS" pyproject.toml | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$VENV/.setup-stamp" 2>/dev/null)" != "$stamp" ]; then
        if [ -f "$VENV/.setup-stamp" ]; then
            say "updating the Python packages to $(basename "$REQUIREMENTS") (only what changed is downloaded)"
        else
            say "installing the pinned Python packages of $(basename "$REQUIREMENTS") into $(basename "$VENV"): the first" \
                "time this downloads several hundred MB (PyTorch's CPU wheel alone is about 190 MB) and usually takes a" \
                "few minutes, 10 to 15 on a slow connection or a busy machine. pip's progress follows; later runs" \
                "skip this step."
        fi
        local log="$VENV/pip-install.log"
        : > "$log"
        if ! { "$PY" -m pip install --disable-pip-version-check --log "$log" --upgrade pip &&
               "$PY" -m pip install --disable-pip-version-check --log "$log" -r "$REQUIREMENTS" &&
               "$PY" -m pip install --disable-pip-version-check --log "$log" -q --no-deps -e . ; }; then
            pip_failed "$log"
            return 1
        fi
        echo "$stamp" > "$VENV/.setup-stamp"
        say "Python packages installed"
    fi
}

pip_failed() {  # pip_failed LOG: what to do when the install stopped (a download, most often)
    say "installing the Python packages stopped (pip's last lines are above; its whole log: ${1#"$ROOT"/})."
    say "If a download failed or timed out: check your connection and run the same command again; pip keeps" \
        "what it already downloaded in its cache, so the next try resumes. Behind a proxy, set HTTPS_PROXY" \
        "(e.g. export HTTPS_PROXY=http://proxy.example:3128) first. 'No space left on device': free a few GB" \
        "(pip needs about 3 GB while installing). Still stuck: delete .venv and run it again, or use Colab (README)."
}

setup_common() {
    ensure_system_tool dot graphviz \
        "Install Graphviz (Debian/Ubuntu: sudo apt-get install graphviz; macOS: brew install graphviz; Windows: winget install graphviz). Graphs fall back to text until then." \
        || true
    # lesson 10 builds a C++ extension (torch.utils.cpp_extension): a compiler and ninja, only where lesson 10 is
    # (a student edition released up to an earlier lesson has no course_utils/kernels and needs neither)
    if [ -d "$ROOT/course_utils/kernels" ]; then
        ensure_system_tool g++ g++ "Lesson 10's C++ extension needs a C++ compiler (Debian/Ubuntu: sudo apt-get install g++; macOS: xcode-select --install)." \
            || true
        ensure_system_tool ninja ninja-build "Lesson 10's C++ extension needs ninja (Debian/Ubuntu: sudo apt-get install ninja-build; macOS: brew install ninja)." \
            || true
    fi
    setup_python || exit 1
}

open_lab() {  # open_lab [JupyterLab arguments]: set up, then JupyterLab on the start page
    setup_common
    # lab/jupyter_lab_config.py: opens the start page, no news prompt, students see lessons and exercises
    local args=(--config="$ROOT/lab/jupyter_lab_config.py" --ServerApp.root_dir="$ROOT")
    [ "$(id -u)" = 0 ] && args+=(--allow-root)
    [ -z "${DISPLAY:-}" ] && [ "$(uname)" = Linux ] && args+=(--no-browser)
    say "starting JupyterLab on the start page (Ctrl-C to stop)"
    exec "$VENV/bin/jupyter" lab "${args[@]}" "$@"
}
