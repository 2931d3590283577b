"""Offline stand-in for the pip bootstrap script that ansible-test downloads.

ansible-test creates an empty venv per sanity test and runs a cached "get-pip" script in it,
downloading that script from a host this project cannot reach. This script does the same job
with the standard library's ensurepip, then lets pip install the pinned packages ansible-test
asks for from the package index.

    python tests/sanity/pip_bootstrap.py --install   # place it where ansible-test looks (make sanity does)
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

GET_PIP_ONLY_FLAGS = ("--no-setuptools", "--no-wheel")


def cache_path():
    """Where ansible-test looks for the bootstrap script of the pip version it pins."""
    import ansible_test

    source = Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
    match = re.search(r"pip='([0-9.]+)'", source.read_text())
    if not match:
        raise SystemExit("cannot find the pip version ansible-test pins in %s" % source)
    return Path(os.path.expanduser("~/.ansible/test/cache")) / ("get_pip_%s.py" % match.group(1).replace(".", "_"))


def install():
    target = cache_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(__file__, target)
    print("pip bootstrap for ansible-test placed at %s" % target)


def bootstrap(args):
    # In a child process: ensurepip blanks pip's configuration (PIP_CONFIG_FILE) in the process it runs in,
    # and the site's pip configuration (index, certificates) must still apply to the install below.
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"], stdout=subprocess.DEVNULL)
    pip_args = [a for a in args if a not in GET_PIP_ONLY_FLAGS]
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *pip_args])


if __name__ == "__main__":
    if sys.argv[1:] == ["--install"]:
        install()
    else:
        bootstrap(sys.argv[1:])
