/* Cohort runtime: messages to stderr, formatted without allocating. */
#define _GNU_SOURCE
#include "system.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void emit(const char *prefix, const char *fmt, va_list ap) {
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "%s", prefix);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  if (m < 0) m = 0;
  size_t len = (size_t)n + ((size_t)m < sizeof buf - (size_t)n - 1 ? (size_t)m : sizeof buf - (size_t)n - 2);
  buf[len++] = '\n';
  ch_write_all(2, buf, len);
}

void ch_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit("cohort: warning: ", fmt, ap);
  va_end(ap);
}

void ch_info(const char *fmt, ...) {
  if (!ch_opt.verbose) return;
  va_list ap;
  va_start(ap, fmt);
  emit("cohort: ", fmt, ap);
  va_end(ap);
}

void ch_fatal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit("cohort: ", fmt, ap);
  va_end(ap);
  abort();
}
