# torchtpu build: the C core library and its C tests.
#
#   make -j2 core      build/libttpu_core.a from every csrc/core/**/*.c (after `layering`)
#   make layering      tools/check_layering.py: which folder may include which
#   make ctest         build and run build/ttpu_ctest (tests/c/*.c)
#   make asan-ctest    the same under -fsanitize=address,undefined
#   make valgrind-ctest  build/ttpu_ctest under valgrind (slow: minutes)
#   make engine-op-latency  the engine's per-op cost and allocations (benchmarks/)
#   make clean
#
# New .c files under csrc/core/ and tests/c/ are picked up automatically.

CC ?= cc
# -ffile-prefix-map: file names in assertion messages and debug info are
# relative to the source tree, not the directory it was built in.
CORE_CFLAGS := -std=c11 -O2 -g -fPIC -Wall -Wextra -D_GNU_SOURCE -Icsrc/core/include \
  -ffile-prefix-map=$(CURDIR)=.
CFLAGS_EXTRA ?=
TEST_LIBS := -ldl -lpthread -lm

CORE_SRCS := $(sort $(shell find csrc/core -name '*.c' 2>/dev/null))
TEST_SRCS := $(sort $(wildcard tests/c/*.c))

# The C tests find the CPU plugin in the repo's virtualenv unless
# TTPU_SITE_PACKAGES is set at run time.
VENV_PY := $(CURDIR)/.venv/bin/python
SITE_PACKAGES := $(if $(wildcard $(VENV_PY)),$(shell $(VENV_PY) -c 'import site;print(site.getsitepackages()[0])'))
TEST_CFLAGS := -Itests/c -Icsrc/core \
  -DTTPU_DEFAULT_SITE_PACKAGES='"$(SITE_PACKAGES)"'

# $(1) = build dir, $(2) = extra flags; objects mirror the source tree so
# same-named files in different directories do not collide.
core_objs = $(patsubst csrc/core/%.c,$(1)/core/%.o,$(CORE_SRCS))
test_objs = $(patsubst tests/c/%.c,$(1)/tests/%.o,$(TEST_SRCS))

B := build
ASAN_B := build/asan
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

.PHONY: all core layering ctest asan-ctest valgrind-ctest engine-op-latency clean force-flags-check
all: core

# The engine does not build while a folder includes what its layer may not
# (the rules and the reasons: tools/check_layering.py).
core: layering $(B)/libttpu_core.a

# A source distribution ships without tools/: nothing to check there.
layering:
	@if [ -f tools/check_layering.py ]; then python3 tools/check_layering.py; fi

# The engine's objects rebuild when its compile flags change (make itself
# only compares times): build/core.flags holds the flags they were built
# with, rewritten only when they differ.
FLAGS_STAMP := $(B)/core.flags
$(FLAGS_STAMP): force-flags-check
	@mkdir -p $(@D)
	@echo '$(CC) $(CORE_CFLAGS) $(CFLAGS_EXTRA)' | cmp -s - $@ || echo '$(CC) $(CORE_CFLAGS) $(CFLAGS_EXTRA)' > $@

$(B)/core/%.o: csrc/core/%.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CORE_CFLAGS) $(CFLAGS_EXTRA) -MMD -MP -c $< -o $@

$(B)/tests/%.o: tests/c/%.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CORE_CFLAGS) $(TEST_CFLAGS) $(CFLAGS_EXTRA) -MMD -MP -c $< -o $@

$(B)/libttpu_core.a: $(call core_objs,$(B))
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(B)/ttpu_ctest: $(call test_objs,$(B)) $(B)/libttpu_core.a
	$(CC) $(CORE_CFLAGS) -o $@ $(call test_objs,$(B)) $(B)/libttpu_core.a $(TEST_LIBS)

ctest: $(B)/ttpu_ctest
	./$(B)/ttpu_ctest

$(ASAN_B)/core/%.o: csrc/core/%.c
	@mkdir -p $(@D)
	$(CC) $(CORE_CFLAGS) $(ASAN_FLAGS) $(CFLAGS_EXTRA) -MMD -MP -c $< -o $@

$(ASAN_B)/tests/%.o: tests/c/%.c
	@mkdir -p $(@D)
	$(CC) $(CORE_CFLAGS) $(TEST_CFLAGS) $(ASAN_FLAGS) $(CFLAGS_EXTRA) -MMD -MP -c $< -o $@

$(ASAN_B)/libttpu_core.a: $(call core_objs,$(ASAN_B))
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(ASAN_B)/ttpu_ctest: $(call test_objs,$(ASAN_B)) $(ASAN_B)/libttpu_core.a
	$(CC) $(CORE_CFLAGS) $(ASAN_FLAGS) -o $@ $(call test_objs,$(ASAN_B)) $(ASAN_B)/libttpu_core.a $(TEST_LIBS)

# The plugin is not instrumented; LSan suppressions for its own one-time
# allocations live in tests/c/lsan.supp (see the comments there).
asan-ctest: $(ASAN_B)/ttpu_ctest
	ASAN_OPTIONS=detect_leaks=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/c/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1 \
	./$(ASAN_B)/ttpu_ctest

# Fails on any definitely-lost block; plugin-internal false positives are
# suppressed in tests/c/valgrind.supp (reasons there). The aot tests skip
# here: libtpu's compiler reports tens of thousands of errors of its own
# under valgrind (our aot code runs with libtpu under asan-ctest).
valgrind-ctest: $(B)/ttpu_ctest
	TORCHTPU_LIBTPU=$(CURDIR)/no-libtpu-under-valgrind \
	valgrind --leak-check=full --errors-for-leak-kinds=definite \
	  --suppressions=$(CURDIR)/tests/c/valgrind.supp --error-exitcode=9 \
	  ./$(B)/ttpu_ctest

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)

# The engine's own per-op cost, without PyTorch (benchmarks/engine_op_latency.c).
$(B)/engine_op_latency: benchmarks/engine_op_latency.c $(B)/libttpu_core.a
	$(CC) $(CORE_CFLAGS) -o $@ $< $(B)/libttpu_core.a \
	  -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc $(TEST_LIBS)

engine-op-latency: $(B)/engine_op_latency
	./$(B)/engine_op_latency $(if $(ARGS),$(ARGS),$(SITE_PACKAGES))

