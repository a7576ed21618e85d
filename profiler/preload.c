/* The preload is valgrind's replacement-malloc archive, linked whole; this
 * file only gives the shared object a translation unit of its own. */
void vgpreload_cohort_marker(void) {}
