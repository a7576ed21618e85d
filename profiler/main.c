/* Cohort's Valgrind tool: registration, options, and the raw profile written
 * at exit. `cohort profile` (cohort/measure/profile.py) runs it and turns the raw
 * profile into profile.json (docs/profile-format.md). */
#include "profiler.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_options.h"
#include "pub_tool_vki.h"

const HChar *ch_clo_out = "cohort.raw";
const HChar *ch_clo_main = NULL;
const HChar *ch_clo_progress = NULL;
const HChar *ch_clo_modules = NULL;
Long ch_clo_affinity = 128;
Long ch_clo_max_size = 4096;
Bool ch_clo_layouts = True, ch_clo_lines = True, ch_clo_pointers = True;

static Bool process_option(const HChar *arg) {
  if VG_STR_CLO(arg, "--cohort-out", ch_clo_out) {}
  else if VG_STR_CLO(arg, "--cohort-main", ch_clo_main) {}
  else if VG_STR_CLO(arg, "--cohort-progress", ch_clo_progress) {}
  else if VG_STR_CLO(arg, "--cohort-modules", ch_clo_modules) {}
  else if VG_BINT_CLO(arg, "--affinity-distance", ch_clo_affinity, 1, 1 << 20) {}
  else if VG_BINT_CLO(arg, "--max-size", ch_clo_max_size, 1, 1 << 30) {}
  else if VG_STR_CLO(arg, "--cohort-trace", ch_clo_trace) {}
  else if VG_BINT_CLO(arg, "--trace-budget", ch_clo_trace_budget, 1, 1 << 30) {}
  else if VG_BOOL_CLO(arg, "--cohort-loads", ch_clo_loads) {}
  else if VG_BINT_CLO(arg, "--stride-window", ch_clo_stride_window, 4, 1 << 20) {}
  else if VG_BOOL_CLO(arg, "--cohort-layouts", ch_clo_layouts) {}
  else if VG_BOOL_CLO(arg, "--cohort-lines", ch_clo_lines) {}
  else if VG_BOOL_CLO(arg, "--cohort-pointers", ch_clo_pointers) {}
  else if VG_BINT_CLO(arg, "--sample-base", ch_clo_sample_base, 0, (Long)1 << 40) {}
  else return False;
  return True;
}

static void print_usage(void) {
  VG_(printf)(
    "    --cohort-out=FILE          raw profile to write, %%p is the pid [cohort.raw]\n"
    "    --cohort-main=PATH         resolved path of the main executable\n"
    "    --cohort-progress=FILE     rewrite FILE about once a second with the counts so far\n"
    "    --cohort-modules=FILE      append to FILE the path of each non-system module as it is first seen\n"
    "    --affinity-distance=N      HALO's affinity distance A, bytes [128]\n"
    "    --max-size=N               largest object whose accesses count [4096]\n"
    "    --cohort-trace=FILE        write the heap reference trace to FILE, %%p is the pid\n"
    "    --trace-budget=N           references the trace holds; beyond, it samples bursts [1000000]\n"
    "    --cohort-loads=yes|no      simulate the cache and find strided, missing loads [no]\n"
    "    --stride-window=N          executions of a load per stride window (MO's t) [64]\n"
    "    --cohort-layouts=yes|no    model the rest pool's two shapes (layouts.c) [yes]\n"
    "    --cohort-lines=yes|no      model where in its line a block starts (lines.c; needs the layouts) [yes]\n"
    "    --cohort-pointers=yes|no   count the stores that link two objects (APA's DS graph) [yes]\n"
    "    --sample-base=N            accesses to the tracked span analysed whole; beyond, windows (sample.c); 0: all\n"
    "                               [4194304]\n");
}

static void print_debug_usage(void) { VG_(printf)("    (none)\n"); }

/* Progress for `cohort profile`, which polls the file: one fixed-width line,
 * rewritten in place at most once a second from the scheduler's hook (it runs
 * at every time slice, so a busy program reports on time). Only the process
 * that opened the file writes it: a forked child keeps quiet. */
static Int progress_fd = -1, progress_pid;
static UInt progress_last;

static void open_progress(void) {
  if (!ch_clo_progress) return;
  SysRes r = VG_(open)(ch_clo_progress, VKI_O_CREAT | VKI_O_TRUNC | VKI_O_WRONLY,
                       VKI_S_IRUSR | VKI_S_IWUSR);
  if (sr_isError(r)) return;
  progress_fd = (Int)sr_Res(r);
  progress_pid = VG_(getpid)();
}

static void report_progress(void) {
  UInt now = VG_(read_millisecond_timer)();
  if (progress_fd < 0 || (progress_last && now - progress_last < 1000) || VG_(getpid)() != progress_pid)
    return;
  progress_last = now ? now : 1;
  HChar line[96];
  Int n = VG_(snprintf)(line, sizeof line, "progress %u %llu %llu %llu", now, ch_seq,
                        ch_tracked_accesses, ch_total_accesses);
  while (n < (Int)sizeof line - 1) line[n++] = ' ';
  line[sizeof line - 1] = '\n';
  VG_(lseek)(progress_fd, 0, VKI_SEEK_SET);
  VG_(write)(progress_fd, line, sizeof line);
}

/* The hook runs whenever client code resumes: at every time slice, but also
 * after every client request, which each malloc and free of the client is
 * (objects.c), and every system call. Reading the clock each time, a system
 * call under Valgrind, took a tenth of the tool's time on calc's training run
 * (1.9 M allocations and frees): so the clock is read only once the client
 * has run PROGRESS_BLOCKS more blocks, a few milliseconds of it. */
#define PROGRESS_BLOCKS ((ULong)1 << 20)
static ULong progress_blocks;

static void start_client_code(ThreadId tid, ULong blocks) {
  ch_set_thread(tid);
  if (progress_fd < 0 || blocks - progress_blocks < PROGRESS_BLOCKS) return;
  progress_blocks = blocks;
  report_progress();
}

static void post_clo_init(void) {
  if (!ch_clo_layouts) ch_clo_lines = False;   /* its packed place is the layouts' one pool */
  ch_contexts_init();
  ch_affinity_init();
  ch_trace_init();
  if (ch_clo_trace) ch_clo_sample_base = 0;   /* the trace samples on its own (trace.c) */
  ch_sample_init();
  open_progress();
}

/* The raw profile: a line-oriented dump that cohort/measure/profile.py reads. */
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
  ch_sample_write(f);
  if (ch_clo_layouts) ch_layouts_write(f);
  if (ch_clo_lines) ch_lines_write(f);
  ch_cache_write(f);
  ch_loads_write(f);     /* before the modules: it may name new ones */
  ch_contexts_write(f);
  ch_affinity_write(f);
  if (ch_clo_pointers) ch_pointers_write(f);
  ch_trace_write(f);
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
