# Developer targets (see docs/pages/reliability.md).  Run from the repository root.
#
#   make test          the test suite against the in-place build
#   make debug-test    the suite against a checked build (CTOK_DEBUG=1: bounds/wraparound checks, asserts, -O0 -g)
#   make asan          AddressSanitizer + UBSan build, tests run with libasan preloaded
#   make valgrind      memcheck on a small test subset (PYTHONMALLOC=malloc, checked build)
#   make leak          tools/leak_check.py: a million calls per API, live blocks and RSS must stay flat
#   make fuzz          each atheris target in fuzz/ for FUZZ_RUNS runs; make fuzz-asan: the same on the ASan build
#
# The sanitizer and debug builds go to build/<variant>/ (a copy of ctok/ compiled there) and the tests import
# that copy through PYTHONPATH, so the in-place build (`pip install -e .`) is never touched.
# Variables: PYTHON, PYTEST_ARGS, ASAN_TESTS, VALGRIND_TESTS, FUZZ_RUNS, LEAK_N.

PYTHON ?= python
PYTEST_ARGS ?= -q -p no:cacheprovider
BUILD ?= build
CC ?= gcc

# Subsets for the slow tools (a whole suite under valgrind takes hours).
ASAN_TESTS ?= tests
VALGRIND_TESTS ?= tests/test_core_native.py tests/test_hostile.py::test_cache_damaged_files_are_never_trusted \
	tests/test_errors.py
VALGRIND_K ?= not long_pieces and not marker_word
FUZZ_RUNS ?= 100000
LEAK_N ?= 1000000

# The interpreter itself, not a wrapper script (pyenv shims are shell scripts: valgrind would check bash)
PYTHON_EXE := $(shell $(PYTHON) -c "import sys; print(sys.executable)")
LIBASAN := $(shell $(CC) -print-file-name=libasan.so)
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g
# CPython's own allocations are never freed at exit: leak reports would be noise.  PYTHONMALLOC=malloc sends
# every Python object through ASan's malloc, so an overflow into one is caught as well.
ASAN_ENV := LD_PRELOAD=$(LIBASAN) PYTHONMALLOC=malloc \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0:handle_segv=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# $(1): variant folder; $(2): environment of the build.  Copies ctok/ (sources, data, Python files) without the
# in-place binaries and generated C, and compiles it there.
define build_variant
	rm -rf $(1)
	mkdir -p $(1)
	cp -r ctok setup.py $(1)/
	rm -f $(1)/ctok/*.so $(1)/ctok/_*.c
	cd $(1) && $(2) $(PYTHON) setup.py -q build_ext --inplace
	@echo "built $(1)/ctok"
endef

.PHONY: help test debug-test debug-build asan asan-build valgrind leak fuzz fuzz-asan clean-variants

help:
	@sed -n '1,12p' Makefile

test:
	$(PYTHON) -m pytest $(PYTEST_ARGS)

debug-build:
	$(call build_variant,$(BUILD)/debug,CTOK_DEBUG=1)

# Run from inside the variant folder: `python -m pytest` puts the current folder first on sys.path, so ctok is
# imported from there (and PYTHONPATH serves subprocesses); the check line proves which build is tested.
define run_in_variant
	cd $(1) && $(2) PYTHONPATH=$(CURDIR)/$(1) $(PYTHON) -c \
		"import ctok, os; p = os.path.dirname(ctok.__file__); print('ctok under test:', p); \
		assert os.path.samefile(p, os.path.join('$(CURDIR)/$(1)', 'ctok')), p"
	cd $(1) && $(2) PYTHONPATH=$(CURDIR)/$(1) $(PYTHON) -m pytest $(PYTEST_ARGS) $(3)
endef

debug-test: debug-build
	$(call run_in_variant,$(BUILD)/debug,,$(CURDIR)/tests)

asan-build:
	$(call build_variant,$(BUILD)/asan,CFLAGS="$(ASAN_FLAGS)" LDFLAGS="$(ASAN_FLAGS)")

# Tests that time things (growth ratios) or measure memory are meaningless under ASan and are deselected.
asan: asan-build
	$(call run_in_variant,$(BUILD)/asan,$(ASAN_ENV) CTOK_CACHE_DIR=off,$(addprefix $(CURDIR)/,$(ASAN_TESTS)) \
		-k "not growth and not bounded_memory and not load_time")

valgrind: debug-build
	cd $(BUILD)/debug && PYTHONMALLOC=malloc PYTHONPATH=$(CURDIR)/$(BUILD)/debug CTOK_CACHE_DIR=off \
		valgrind --tool=memcheck --error-exitcode=99 --leak-check=no --track-origins=yes \
		--suppressions=$(CURDIR)/tools/valgrind-python.supp --num-callers=30 \
		$(PYTHON_EXE) -m pytest $(PYTEST_ARGS) -x $(addprefix $(CURDIR)/,$(VALGRIND_TESTS)) -k "$(VALGRIND_K)"

leak:
	$(PYTHON) tools/leak_check.py --n $(LEAK_N)

fuzz:
	mkdir -p $(BUILD)/fuzz
	for t in fuzz_encode fuzz_load fuzz_vocab_cache fuzz_normalize; do \
		$(PYTHON) fuzz/$$t.py -runs=$(FUZZ_RUNS) -max_len=4096 -artifact_prefix=$(BUILD)/fuzz/$$t- || exit 1; \
	done

fuzz-asan: asan-build
	mkdir -p $(BUILD)/fuzz
	for t in fuzz_encode fuzz_load fuzz_vocab_cache fuzz_normalize; do \
		$(ASAN_ENV) PYTHONPATH=$(CURDIR)/$(BUILD)/asan CTOK_CACHE_DIR=off \
		$(PYTHON) fuzz/$$t.py -runs=$(FUZZ_RUNS) -max_len=4096 -artifact_prefix=$(BUILD)/fuzz/asan-$$t- || exit 1; \
	done

clean-variants:
	rm -rf $(BUILD)/debug $(BUILD)/asan $(BUILD)/fuzz
