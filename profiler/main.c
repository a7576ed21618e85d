/* Cohort's Valgrind tool: registration, options, and the raw profile written
 * at exit. `cohort profile` (cohort/profile.py) runs it and turns the raw
 * profile into profile.json (docs/profile-format.md). */
#include "profiler.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_options.h"
#include "pub_tool_vki.h"

const HChar *ch_clo_out = "cohort.raw";
const HChar *ch_clo_main = NULL;
Long ch_clo_affinity = 128;
Long ch_clo_max_size = 4096;

static Bool process_option(const HChar *arg) {
  if VG_STR_CLO(arg, "--cohort-out", ch_clo_out) {}
  else if VG_STR_CLO(arg, "--cohort-main", ch_clo_main) {}
  else if VG_BINT_CLO(arg, "--affinity-distance", ch_clo_affinity, 1, 1 << 20) {}
  else if VG_BINT_CLO(arg, "--max-size", ch_clo_max_size, 1, 1 << 30) {}
  else return False;
  return True;
}

static void print_usage(void) {
  VG_(printf)(
    "    --cohort-out=FILE          raw profile to write, %%p is the pid [cohort.raw]\n"
    "    --cohort-main=PATH         resolved path of the main executable\n"
    "    --affinity-distance=N      HALO's affinity distance A, bytes [128]\n"
    "    --max-size=N               largest object whose accesses count [4096]\n");
}

static void print_debug_usage(void) { VG_(printf)("    (none)\n"); }

static void start_client_code(ThreadId tid, ULong blocks) { ch_set_thread(tid); }

static void post_clo_init(void) {
  ch_contexts_init();
  ch_affinity_init();
}

/* The raw profile: a line-oriented dump that cohort/profile.py reads. */
static void fini(Int exitcode) {
  /* %p in the name: a forked child, which also runs this, writes its own. */
  const HChar *path = VG_(expand_file_name)("--cohort-out", ch_clo_out);
  VgFile *f = VG_(fopen)(path, VKI_O_CREAT | VKI_O_TRUNC | VKI_O_WRONLY,
                         VKI_S_IRUSR | VKI_S_IWUSR | VKI_S_IRGRP | VKI_S_IROTH);
  if (!f) {
    VG_(umsg)("cohort: cannot write the raw profile to %s\n", path);
    return;
  }
  VG_(fprintf)(f, "cohort-raw %s\n", CH_TOOL_VERSION);
  VG_(fprintf)(f, "param affinity-distance %lld\nparam max-size %lld\n", ch_clo_affinity,
               ch_clo_max_size);
  VG_(fprintf)(f, "exit %d\n", exitcode);
  ch_objects_write(f);
  ch_contexts_write(f);
  ch_affinity_write(f);
  VG_(fprintf)(f, "end\n");
  VG_(fclose)(f);
}

static void munmap_code(Addr a, SizeT len) { ch_contexts_forget_range(a, len); }

static void pre_clo_init(void) {
  VG_(details_name)("Cohort");
  VG_(details_version)(CH_TOOL_VERSION);
  VG_(details_description)("the profiler of Cohort (affinity graphs of heap contexts)");
  VG_(details_copyright_author)("Copyright (C) the Cohort authors.");
  VG_(details_bug_reports_to)("the Cohort issue tracker");
  VG_(details_avg_translation_sizeB)(600);
  VG_(basic_tool_funcs)(post_clo_init, ch_instrument, fini);
  VG_(needs_command_line_options)(process_option, print_usage, print_debug_usage);
  VG_(track_start_client_code)(start_client_code);
  VG_(track_die_mem_munmap)(munmap_code);
  ch_objects_init();
}

VG_DETERMINE_INTERFACE_VERSION(pre_clo_init)
