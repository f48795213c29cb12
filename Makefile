# dtrain: build, test and install.
#
#   make            build build/dtrain (objects under build/, mirroring the tree)
#   make deps       install the missing Debian packages (apt-get, as root)
#   make demo       deps + build + train models/fashion_mlp.yaml
#   make check      deps + build + every test; ends with "N passed, N failed"
#   make fuzz       clang + the libFuzzer harnesses of tests/fuzz/, each run FUZZ_S
#                   seconds (default 60); a finding is kept in tests/fuzz/regress/
#   make install    binary, man pages and the bash and zsh completions under
#                   $(DESTDIR)$(PREFIX) (default /usr/local); BASH_COMPDIR and
#                   ZSH_COMPDIR move the completions
#   make uninstall  removes what make install put there
#   make device-kit build/device-kit.tar.xz: dtrain with CUDA, its tests and
#                   libraries, bats, jq, Fashion-MNIST, for a bare GPU machine
#                   (tests/gpu/device-run.sh runs it there)
#   make clean
#
# Switches: V=1 (show commands), DEBUG=1 (-O0 -g), SANITIZE=1 (ASan + UBSan,
# objects under build/san/), NATIVE=0 (a binary for any x86-64, without this
# CPU's vector instructions in dtrain's own loops; oneDNN dispatches at run
# time either way). CUDA=0 leaves the CUDA backend out, CUDA=1 requires it;
# by default it is built when nvcc is found (PATH, then /usr/local/cuda/bin).

VERSION := 0.1.0
PREFIX ?= /usr/local
BASH_COMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSH_COMPDIR ?= $(PREFIX)/share/zsh/vendor-completions
CC ?= cc

# Debian packages the build, the tests and the demo need.
DEPS_BUILD := gcc make pkg-config libdnnl-dev libyaml-dev zlib1g-dev libpng-dev \
	libcjson-dev libopenmpi-dev openmpi-bin libprotobuf-c-dev protobuf-c-compiler python3-onnx
DEPS_TEST := libcmocka-dev bats jq groff-base python3 python3-numpy python3-sklearn python3-yaml iproute2 zsh \
	python3-vega-datasets
DEPS_DATA := dataset-fashion-mnist
DEPS := $(DEPS_BUILD) $(DEPS_TEST) $(DEPS_DATA)
# Only for `make bench` (the PyTorch reference and peak-RSS measurement).
DEPS_BENCH := python3-torch python3-numpy python3-sklearn libopenblas0-pthread time
# Only for `make fuzz` (clang's libFuzzer and sanitizers; omp.h for clang).
DEPS_FUZZ := clang libclang-rt-dev libomp-dev

ifeq ($(V),1)
Q :=
else
Q := @
endif

ifeq ($(SANITIZE),1)
BUILD := build/san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD := build
SANFLAGS :=
endif

ifeq ($(DEBUG),1)
OPT := -O0 -g
else
OPT := -O3 -g
endif
ifneq ($(NATIVE),0)
OPT += -march=native
endif

PKGS := yaml-0.1 zlib libpng libcjson ompi-c libprotobuf-c

# ONNX's published schema (python3-onnx ships it), compiled by protoc-c into
# build/gen/ at build time for dtrain export (core/export/onnx.c).
ONNX_PROTO_DIR ?= /usr/lib/python3/dist-packages/onnx
ONNX_GEN := build/gen/onnx.pb-c.c build/gen/onnx.pb-c.h
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CFLAGS += -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Wextra -Wno-unused-parameter -Wshadow \
	-fopenmp -fno-math-errno $(SANFLAGS) -I. -Ibuild/gen $(PKG_CFLAGS) -DDT_VERSION='"$(VERSION)"' -MMD -MP
LDLIBS += $(PKG_LIBS) -ldnnl -fopenmp -lm -lpthread -ldl
LDFLAGS += $(SANFLAGS)

# ---- CUDA backend: build/libdtrain_cuda.so, dlopen()ed by dtrain on first GPU use (core/cuda/cuda.h) ----
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
ifeq ($(CUDA),0)
CUDA_ON := 0
else ifeq ($(CUDA),1)
ifeq ($(NVCC),)
$(error CUDA=1 but nvcc was not found (PATH, /usr/local/cuda/bin); install the CUDA toolkit or use CUDA=0)
endif
CUDA_ON := 1
else
CUDA_ON := $(if $(NVCC),1,0)
endif
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
# Hopper code, plus PTX for compute 8.0 that the driver compiles for any newer GPU.
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80
NVCCFLAGS ?= -O3 -std=c++17 $(NVCC_ARCH) -Xcompiler -fPIC,-fvisibility=hidden,-Wall -I. -MMD -MP
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcublas -lcudnn -lnccl -Xlinker -rpath=$(CUDA_HOME)/lib64
CUDA_SRC := $(wildcard core/*.cu core/*/*.cu)
# Objects under build/cuda/ whatever SANITIZE says: the .cu files are compiled once.
CUDA_OBJ := $(CUDA_SRC:%.cu=build/cuda/%.o)
CUDA_SO := build/libdtrain_cuda.so
ifeq ($(CUDA_ON),1)
CUDA_TARGETS := $(CUDA_SO) $(if $(filter-out build,$(BUILD)),$(BUILD)/libdtrain_cuda.so) \
	$(BUILD)/tests/unit/libdtrain_cuda.so
endif
ifeq ($(MAKELEVEL),0)
ifeq ($(CUDA_ON),1)
$(info CUDA backend: on ($(NVCC), $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')))
else
$(info CUDA backend: off ($(if $(filter 0,$(CUDA)),CUDA=0,nvcc not found)))
endif
endif

LIB_SRC := $(wildcard core/*.c core/*/*.c layers/*.c data/*.c strategies/*.c)
CMD_SRC := $(wildcard cmd/*.c)
TEST_SRC := $(wildcard tests/unit/test_*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/onnx.pb-c.o
CMD_OBJ := $(CMD_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:%.c=$(BUILD)/%)
# Helpers the CLI tests run (tests/tools/NAME.c -> $(BUILD)/tests/tools/NAME).
TOOL_BIN := $(patsubst %.c,$(BUILD)/%,$(wildcard tests/tools/*.c))
LIB := $(BUILD)/libdtrain.a
BIN := $(BUILD)/dtrain

.PHONY: all deps demo check test install uninstall clean found
# The tools too: CLI tests such as multihost.bats run them after a plain `make`.
all: $(BIN) $(CUDA_TARGETS) $(TOOL_BIN)

# Only the loader needs to know whether the backend was built.
$(BUILD)/core/cuda/cuda.o: CFLAGS += -DDT_CUDA_BUILT=$(CUDA_ON)
$(BUILD)/core/cuda/cuda.o: $(if $(filter 1,$(CUDA_ON)),build/cuda/.on,build/cuda/.off)
build/cuda/.on build/cuda/.off:
	@mkdir -p build/cuda && rm -f build/cuda/.on build/cuda/.off && touch $@

build/cuda/%.o: %.cu
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  NVCC    $<")
	$(Q)$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(CUDA_SO): $(CUDA_OBJ)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(NVCC) -shared -o $@ $(CUDA_OBJ) $(CUDA_LIBS)

# Sanitizer builds and test binaries find the one shared object through a link.
ifneq ($(BUILD),build)
$(BUILD)/libdtrain_cuda.so: $(CUDA_SO)
	@mkdir -p $(dir $@)
	$(Q)ln -sf $(CURDIR)/$(CUDA_SO) $@
endif
$(BUILD)/tests/unit/libdtrain_cuda.so: $(CUDA_SO)
	@mkdir -p $(dir $@)
	$(Q)ln -sf $(CURDIR)/$(CUDA_SO) $@

# One generation whatever BUILD is (as build/cuda/); every object may include it.
$(ONNX_GEN) &: $(ONNX_PROTO_DIR)/onnx.proto
	@mkdir -p build/gen
	@$(if $(Q),echo "  PROTOC  $<")
	$(Q)protoc-c --c_out=build/gen --proto_path=$(ONNX_PROTO_DIR) onnx.proto
$(LIB_OBJ) $(CMD_OBJ): build/gen/onnx.pb-c.h
$(BUILD)/gen/onnx.pb-c.o: build/gen/onnx.pb-c.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BIN): $(CMD_OBJ) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CMD_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/unit/%: tests/unit/%.c tests/unit/helpers.h $(LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS) -lcmocka

$(BUILD)/tests/tools/%: tests/tools/%.c $(LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  TOOL    $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# Install what is missing; print the command when not root.
deps:
	@missing=""; for p in $(or $(PACKAGES),$(DEPS)); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "deps: all $(words $(or $(PACKAGES),$(DEPS))) packages present ✓"; \
	elif [ "$$(id -u)" != 0 ]; then echo "deps: missing:$$missing"; \
		echo "deps: run as root: apt-get update && apt-get install -y$$missing"; exit 1; \
	else echo "deps: installing$$missing"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q --no-install-recommends $$missing >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $$missing; } || exit 1; \
	fi

found:
	@echo "dtrain $(VERSION) build:"
	@for p in $(PKGS); do pkg-config --exists $$p && echo "  ✓ $$p $$(pkg-config --modversion $$p)" || echo "  ✗ $$p"; done
	@test -f /usr/include/oneapi/dnnl/dnnl.h && echo "  ✓ oneDNN" || echo "  ✗ oneDNN (libdnnl-dev)"
	@command -v protoc-c >/dev/null && echo "  ✓ protoc-c" || echo "  ✗ protoc-c (protobuf-c-compiler)"
	@test -f $(ONNX_PROTO_DIR)/onnx.proto && echo "  ✓ onnx.proto ($(ONNX_PROTO_DIR))" || echo "  ✗ onnx.proto (python3-onnx)"
	@$(if $(filter 1,$(CUDA_ON)),echo "  ✓ nvcc $(NVCC) (CUDA backend: $(CUDA_SO))",echo "  ✗ CUDA backend off ($(if $(filter 0,$(CUDA)),CUDA=0,nvcc not found))")

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	./$(BIN) fit models/fashion_mlp.yaml

check: deps
	$(Q)$(MAKE) --no-print-directory all test-bins
	$(Q)DTRAIN=$(BIN) BUILD=$(BUILD) tests/run.sh

# make test: check without deps (builds, then runs every suite). T=NAME runs the
# suites whose file name contains NAME (test_pipeline, fit.bats), F=WORD the
# cases whose name contains WORD: make test T=resume.bats F=SIGTERM
test:
	$(Q)$(MAKE) --no-print-directory all test-bins
	$(Q)DTRAIN=$(BIN) BUILD=$(BUILD) tests/run.sh '$(T)' '$(F)'

.PHONY: bench test-bins device-kit
# The device kit (tests/gpu/make-kit.sh): unpacked under build/device-kit/,
# packed into build/device-kit.tar.xz, which the device tool carries. Its own
# build (build/device-kit-obj/, NATIVE=0): the GPU machine's processor may
# lack this one's vector instructions.
KIT_BUILD := build/device-kit-obj
KIT_DIR := build/device-kit
KIT_ARCHIVE := build/device-kit.tar.xz
KIT_MAKE := $(MAKE) --no-print-directory CUDA=1 NATIVE=0 SANITIZE= BUILD=$(KIT_BUILD)
device-kit:
	$(Q)$(KIT_MAKE) all test-bins
	$(Q)$(KIT_MAKE) $(KIT_ARCHIVE)

$(KIT_ARCHIVE): $(BIN) $(CUDA_SO) $(TEST_BIN) $(TOOL_BIN) tests/gpu/make-kit.sh tests/gpu/kit-base.sh
	$(Q)tests/gpu/make-kit.sh $(BUILD) $(KIT_DIR) $@

bench: all
	$(Q)$(MAKE) --no-print-directory deps PACKAGES="$(DEPS_BENCH)"
	$(Q)DTRAIN=$(BIN) tests/bench/bench.sh
	$(Q)DTRAIN=$(BIN) tests/bench/strategies.sh
	$(Q)DTRAIN=$(BIN) tests/bench/data_bench.sh
	$(Q)DTRAIN=$(BIN) /usr/bin/python3 tests/bench/diabetes.py

test-bins: $(TEST_BIN) $(TOOL_BIN)

# The reference virtual environment: PyPI packages some tests read with and
# skip cleanly without (tensorboard.bats: tensorboard's own event reader).
# Debian's python3 and numpy underneath (--system-site-packages).
.PHONY: ref-venv
ref-venv:
	$(Q)[ -x $(BUILD)/venv/bin/pip ] || /usr/bin/python3 -m venv --system-site-packages $(BUILD)/venv
	$(Q)$(BUILD)/venv/bin/pip install -q tensorboard onnxruntime
	$(Q)v=$$($(BUILD)/venv/bin/python -c 'import tensorboard, onnxruntime; print("tensorboard", tensorboard.__version__ + ", onnxruntime", onnxruntime.__version__)') && \
		echo "ref-venv: $(BUILD)/venv with $$v ✓"

# Keras 3 on TensorFlow (tensorflow-cpu, about 1.5 GB) in the same
# environment: keras.bats compares dtrain summary's shapes and parameter
# counts with Keras' own for every layer type. Not part of ref-venv: its size.
# TensorFlow brings NumPy 2, and imports pandas, SciPy and scikit-learn where
# it finds them: the environment has its own, as Debian's were built for
# NumPy 1 and fail to load beside it.
.PHONY: keras-venv
keras-venv: ref-venv
	$(Q)$(BUILD)/venv/bin/pip install -q tensorflow-cpu "pandas>=2.2" "scipy>=1.13" "scikit-learn>=1.5"
	$(Q)v=$$($(BUILD)/venv/bin/python -c 'import keras, pandas, scipy.sparse, sklearn; print(keras.__version__)' 2>/dev/null) && \
		echo "keras-venv: $(BUILD)/venv with keras $$v ✓"

# ---- fuzzing: libFuzzer harnesses tests/fuzz/fuzz_NAME.c -> build/fuzz/fuzz_NAME ----
# The library again, built by clang with coverage for libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer (objects under build/fuzz/, no OpenMP: its pragmas are
# ignored). tests/fuzz/run.sh runs each harness FUZZ_S seconds on its seeds.
FUZZ_S ?= 60
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wno-unused-parameter -I. -Ibuild/gen $(PKG_CFLAGS) \
	-DDT_VERSION='"$(VERSION)"' -DDT_CUDA_BUILT=0 -MMD -MP $(FUZZ_SAN)
FUZZ_OBJ := $(LIB_SRC:%.c=build/fuzz/%.o)
FUZZ_BIN := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))

build/fuzz/%.o: %.c build/gen/onnx.pb-c.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

build/fuzz/libdtrain.a: $(FUZZ_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c build/fuzz/libdtrain.a
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< build/fuzz/libdtrain.a $(PKG_LIBS) -ldnnl -lgomp -lm \
		-lpthread -ldl

.PHONY: fuzz fuzz-bins
fuzz-bins: $(FUZZ_BIN)

fuzz:
	$(Q)$(MAKE) --no-print-directory deps PACKAGES="$(DEPS_FUZZ)"
	$(Q)$(MAKE) --no-print-directory fuzz-bins
	$(Q)tests/fuzz/run.sh $(FUZZ_S)

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/dtrain
	$(if $(filter 1,$(CUDA_ON)),install -d $(DESTDIR)$(PREFIX)/lib/dtrain && install -m 755 $(CUDA_SO) $(DESTDIR)$(PREFIX)/lib/dtrain/)
	install -m 644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 man/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -d $(DESTDIR)$(BASH_COMPDIR) $(DESTDIR)$(ZSH_COMPDIR)
	install -m 644 cmd/completion/dtrain.bash $(DESTDIR)$(BASH_COMPDIR)/dtrain
	install -m 644 cmd/completion/_dtrain $(DESTDIR)$(ZSH_COMPDIR)/_dtrain

# The files install put, and lib/dtrain, dtrain's own folder; the folders
# other programs share (bin, share/man/man1, ...) stay.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/dtrain $(DESTDIR)$(PREFIX)/lib/dtrain/libdtrain_cuda.so
	[ ! -d $(DESTDIR)$(PREFIX)/lib/dtrain ] || rmdir $(DESTDIR)$(PREFIX)/lib/dtrain
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man1/,$(notdir $(wildcard man/*.1)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man5/,$(notdir $(wildcard man/*.5)))
	rm -f $(DESTDIR)$(BASH_COMPDIR)/dtrain $(DESTDIR)$(ZSH_COMPDIR)/_dtrain

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
