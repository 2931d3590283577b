# aiinfra.k3s — build, lab and test entry points. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV        := $(CURDIR)/.venv
BIN         := $(VENV)/bin
CACHE       := $(CURDIR)/.cache
LAB_SERVERS ?= 1
LAB_GPU_AGENTS ?= 2
# Set to a directory holding k3s / k3s-arm64, k3s-airgap-images-<arch>.tar.* and sha256sum-<arch>.txt
# to install K3s without internet.
K3S_AIRGAP_DIR ?=
ANSIBLE_ARGS ?=
MOLECULE_SCENARIOS ?= $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))

export CONTAINERS_CONF := $(CURDIR)/lab/nodes/containers.conf
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_HOME := $(CACHE)/ansible-home
export ANSIBLE_COLLECTIONS_PATH := $(CACHE)/collections
export PATH := $(BIN):$(PATH)

LINK := $(CACHE)/collections/ansible_collections/aiinfra/k3s
SANITY_PYTHON := $(shell $(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3.12)
SANITY_ROOT := $(or $(TMPDIR),/tmp)/aiinfra-k3s-sanity/ansible_collections/aiinfra/k3s
LAB_KUBECONFIG ?= $(HOME)/.kube/aiinfra-lab.yaml

CLUSTER_INVENTORY ?= inventories/lab

LITELLM_VENV := $(CACHE)/litellm-venv
OLAH_VENV    := $(CACHE)/olah-venv

.PHONY: locks help venv links gateway runtime crd-deps test-tools docs-check lab lab-bundle lab-live lab-up lab-down lab-status builds test lint yamllint ansible-lint ruff sanity unit molecule bench clean kube-build cluster cluster-down live charts versions

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(BIN)/.installed: requirements-dev.txt
	@py=""; for c in $${PYTHON:-} python3.13 python3.12 $$HOME/.pyenv/versions/3.13*/bin/python3 \
	    $$HOME/.pyenv/versions/3.12*/bin/python3 /usr/bin/python3; do \
	  if [ -n "$$c" ] && command -v "$$c" >/dev/null 2>&1 && \
	     "$$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then py=$$c; break; fi; \
	done; \
	if [ -z "$$py" ]; then \
	  echo "ERROR: Python >= 3.12 not found (ansible-core 2.21 needs it). Install python3.12 or python3.13" \
	       "(apt-get install python3.12, or pyenv install 3.12) or set PYTHON=/path/to/python3.12." >&2; exit 1; fi; \
	echo "[venv] creating $(VENV) with $$py ($$("$$py" --version))"; \
	"$$py" -m venv "$(VENV)"; \
	"$(BIN)/pip" install -q --disable-pip-version-check --require-hashes -r requirements-dev.txt 2> >(grep -v "^WARNING: Location" >&2); \
	touch "$@"

venv: $(BIN)/.installed ## Create the project venv (Python >= 3.12, pinned tools)

# Each Python environment is installed from a lock with the sha256 of every file (`pip install --require-hashes`):
# a release replaced on PyPI under the same version fails to install. Edit the .in file, run this, review the diff.
locks: venv ## Refresh the hashed Python locks (requirements-dev.txt, the LiteLLM, olah and vLLM locks) from their .in files
	$(BIN)/python -m lab.pins.locks compile

links: ## Point the collections path at this working tree
	@mkdir -p "$(dir $(LINK))" "$(ANSIBLE_HOME)"
	@ln -sfn ../../../.. "$(LINK)"

lab-up: venv links ## Build the node image if needed and start the lab nodes
	$(BIN)/python -m lab.nodes.labctl up --servers $(LAB_SERVERS) --gpu-agents $(LAB_GPU_AGENTS)

lab-bundle: venv links kube-build ## Build the lab's K3s stand-in bundle: node components from Go modules, images
	$(BIN)/python -m lab.nodes.k3sbundle build

# The whole site on real kubelets: the k3s role installs the stand-in bundle through its airgap path (or the real
# K3s release in K3S_AIRGAP_DIR, whose image directory must then also hold the lab's images); the stand-in device
# plugin gives the GPU nodes their inventory's GPUs.
lab: lab-bundle lab-up ## Start the lab, converge playbooks/site.yml on real kubelets, run its Prometheus and KEDA; last line KUBECONFIG=<path>
	$(BIN)/python -m lab.nodes.labctl device-plugins --bin "$$($(BIN)/python -m lab.nodes.nodebuild path)"
	$(BIN)/ansible-playbook playbooks/site.yml -i inventories/lab -e k3s_install_mode=airgap \
	  -e k3s_airgap_dir="$(or $(K3S_AIRGAP_DIR),$$($(BIN)/python -m lab.nodes.k3sbundle path))" $(ANSIBLE_ARGS)
	$(BIN)/python -m lab.nodes.observability apply --kubeconfig $(LAB_KUBECONFIG) \
	  --kubectl "$$($(BIN)/python -m lab.nodes.nodebuild path)/kubectl"
	@$(BIN)/python -m lab.nodes.labctl serving --kubeconfig $(LAB_KUBECONFIG) \
	  --kubectl "$$($(BIN)/python -m lab.nodes.nodebuild path)/kubectl"

lab-live: venv links test-tools ## Real kubelets: `make lab`, the tests of tests/lab on it, then `make lab-down` (always)
	@rc=0; { $(MAKE) --no-print-directory lab && LAB_LIVE_REQUIRED=1 $(BIN)/pytest -p no:cacheprovider -rA tests/lab; } || rc=$$?; \
	$(MAKE) --no-print-directory lab-down; exit $$rc

lab-down: ## Remove the lab nodes, volumes, network, inventory, key and kubeconfig; restore the host sysctls
	python3 -m lab.nodes.labctl down --kubeconfig $(LAB_KUBECONFIG)

lab-status: ## List the lab nodes
	python3 -m lab.nodes.labctl status

kube-build: ## Build Kubernetes (the release of k3s_version), etcd, kwok and helm from Go modules (cached under .cache/)
	$(BIN)/python -m lab.live.kubebuild build
	$(BIN)/python -m lab.live.helmbuild build

cluster: venv links ## Live control plane on loopback, kwok nodes of CLUSTER_INVENTORY; last line KUBECONFIG=<path>
	@$(BIN)/python -m lab.live.cluster up --inventory $(CLUSTER_INVENTORY)

cluster-down: ## Stop the live control plane and remove its state
	python3 -m lab.live.cluster down

versions: venv links ## Each pin against the newest release PyPI and the Go module proxy list; fails past end of support
	$(BIN)/python -m lab.pins.versions

charts: venv links ## Render the GPU Operator and cert-manager charts (Go modules) with our values; unknown value paths fail
	$(BIN)/python -m lab.live.charts check --inventory inventories/example --allow-unavailable

live: venv links test-tools kube-build ## Live tests: every API-side stage against the real control plane (kwok nodes)
	$(BIN)/pytest tests/live

lint: yamllint ansible-lint ruff docs-check ## yamllint, ansible-lint (production), ruff, generated docs, changelog

docs-check: venv
	$(BIN)/python docs/gen_role_vars.py --check
	$(BIN)/antsibull-changelog lint

yamllint: venv
	$(BIN)/yamllint --strict .

ansible-lint: venv links
	$(BIN)/ansible-lint --profile production --strict

ruff: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

sanity: venv ## ansible-test sanity from a copy under ansible_collections/aiinfra/k3s
	@rm -rf "$(SANITY_ROOT)" && mkdir -p "$(SANITY_ROOT)"
	@git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C "$(SANITY_ROOT)"
	$(BIN)/python tests/sanity/pip_bootstrap.py --install
	cd "$(SANITY_ROOT)" && $(BIN)/ansible-test sanity --python $(SANITY_PYTHON) --requirements --color no

CRD_DEPS := tests/crd/node_modules/.installed

$(CRD_DEPS): tests/crd/package.json tests/crd/package-lock.json
	@$(MAKE) --no-print-directory test-tools
	npm ci --prefix tests/crd --no-audit --no-fund --loglevel=error
	@touch "$@"

test-tools: ## Install the test tools that come from Debian (npm for CRD schemas, promtool for rules, Redis for the gateway, jq for the klipper-helm stand-in's tests, nginx as the model weights' HTTP mirror, git-lfs for the Hub test repos) if missing
	@missing=""; command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v jq >/dev/null || missing="$$missing jq"; \
	command -v git-lfs >/dev/null || missing="$$missing git-lfs"; \
	PATH="$$PATH:/usr/sbin" command -v nginx >/dev/null || missing="$$missing nginx"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "[test-tools] installing with apt-get:$$missing"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	    case "$$missing" in *prometheus*) systemctl disable --now prometheus >/dev/null 2>&1 || true;; esac; \
	    case "$$missing" in *redis-server*) systemctl disable --now redis-server >/dev/null 2>&1 || true;; esac; \
	    case "$$missing" in *nginx*) systemctl disable --now nginx >/dev/null 2>&1 || true;; esac; \
	  else echo "ERROR: missing$$missing (CRD schema and rule tests): apt-get install$$missing" >&2; exit 1; fi; fi

crd-deps: $(CRD_DEPS) ## Install the pinned CRD schema packages (npm) the unit tests validate against

# olah (the Hub's HTTP API over a local git-lfs repository) for the hub_snapshot module's unit tests.
$(OLAH_VENV)/.installed: tests/weights/requirements-olah.txt | venv
	@echo "[weights] installing olah (tests/weights/requirements-olah.txt) into $(OLAH_VENV)"
	@rm -rf "$(OLAH_VENV)" && $(BIN)/python -m venv "$(OLAH_VENV)"
	"$(OLAH_VENV)/bin/pip" install -q --disable-pip-version-check --require-hashes -r tests/weights/requirements-olah.txt
	@touch "$@"

unit: venv links test-tools crd-deps $(OLAH_VENV)/.installed ## pytest unit tests (the Hub tests must run: olah is installed)
	AIINFRA_WEIGHTS_REQUIRED=1 $(BIN)/pytest tests/unit

$(LITELLM_VENV)/.installed: tests/gateway/requirements-litellm.txt | venv
	@echo "[gateway] installing the LiteLLM proxy (tests/gateway/requirements-litellm.txt) into $(LITELLM_VENV)"
	@rm -rf "$(LITELLM_VENV)" && $(BIN)/python -m venv "$(LITELLM_VENV)"
	"$(LITELLM_VENV)/bin/pip" install -q --disable-pip-version-check --require-hashes -r tests/gateway/requirements-litellm.txt
	@touch "$@"

gateway: venv links test-tools kube-build $(LITELLM_VENV)/.installed ## The real LiteLLM proxy behind the real Traefik (its CRD provider on a live API server) with the rendered objects (stand-in backends)
	$(BIN)/python -m lab.nodes.nodebuild build --part traefik
	$(BIN)/pytest tests/gateway

runtime: venv links ## The real vLLM package started as each rendered model server (its uid without passwd entry, read-only root)
	$(BIN)/python -m lab.live.runtime install-vllm
	$(BIN)/pytest tests/runtime

molecule: venv links ## Molecule scenarios on lab nodes
	$(BIN)/python -m lab.nodes.labctl image
	export LAB_IMAGE=$$($(BIN)/python -m lab.nodes.labctl hash); \
	failed=; for s in $(MOLECULE_SCENARIOS); do $(BIN)/molecule test -s $$s || failed="$$failed $$s"; done; \
	if [ -n "$$failed" ]; then echo "[molecule] failed scenarios:$$failed" >&2; exit 1; fi

# The builds the gateway, live, lab-live and molecule parts need, in one target (e.g. to build everything before a
# run of the tests): the LiteLLM venv, Kubernetes and helm, Traefik, the lab's node components, images and bundle, and
# the node image. Each Go build cache has a lock (lab.build_lock), so it may run beside a part that asks for the same.
builds: venv links $(LITELLM_VENV)/.installed kube-build ## Every build the gateway, live, lab and Molecule parts need: Kubernetes, helm, the lab's node components (Traefik among them), images and bundle, the node image, the LiteLLM venv (cached under .cache/ and in podman's image store)
	$(BIN)/python -m lab.nodes.nodebuild build --part traefik
	$(BIN)/python -m lab.nodes.k3sbundle build
	$(BIN)/python -m lab.nodes.labctl image

# runtime comes before the Go builds: its vLLM venv and the Go caches need not be on disk together (lab/diskuse.py,
# which prints the free space after each part and, with AIINFRA_CI_PRUNE=1 as .ci/run sets, drops spent caches).
# The parts run one after another. `make builds` run beside unit (which leaves a core idle) slowed unit's timed tests
# enough to fail one (test_progress_timeout_stops_the_fetch_and_leaves_its_part), so it is not done here.
TEST_PARTS := lint sanity runtime kube-build unit gateway live lab-live molecule
test: venv links ## Everything CI runs: lint, sanity, runtime, unit, gateway, live, lab-live, molecule (each part's wall time)
	@for t in $(TEST_PARTS); do \
	  t0=$$(date +%s); $(MAKE) --no-print-directory $$t; echo "[time] make $$t: $$(( $$(date +%s) - t0 ))s"; \
	  $(BIN)/python -m lab.diskuse after $$t; \
	done

bench: venv links kube-build test-tools $(LITELLM_VENV)/.installed ## Builds, live cluster, apply and verifier timings; lab converge; edge latency; manifest render; gateway auth latency
	$(BIN)/python benchmarks/live_cluster.py
	$(BIN)/python benchmarks/lab_converge.py --nodes 3
	@rc=0; $(BIN)/python benchmarks/edge_latency.py --fresh || rc=$$?; $(MAKE) --no-print-directory lab-down; exit $$rc
	$(BIN)/python benchmarks/render_manifests.py
	$(BIN)/python benchmarks/gateway_auth.py

clean: lab-down cluster-down ## Remove the lab, the live cluster and caches
	rm -rf $(CACHE)
