/* Cohort runtime: the table of loaded modules (executable ranges, build ids,
 * .eh_frame_hdr), kept append-only so readers need no lock. It is refreshed
 * when a pc falls outside every known module and the loader reports a change.
 * The refresh never waits for another refresh: a thread that finds one in
 * progress treats its pc as unknown, so a dlopen that allocates cannot
 * deadlock against us. */
#define _GNU_SOURCE
#include "context.h"
#include "system_modules.h"

#include <elf.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#define MAX_MODULES 1024

static struct ch_module mods[MAX_MODULES];
static char paths[MAX_MODULES][256];
static atomic_uint nmods;
static atomic_uint generation;
static atomic_int refreshing;
static unsigned long long seen_adds, seen_subs;

unsigned ch_modules_generation(void) { return atomic_load_explicit(&generation, memory_order_acquire); }

/* The list is part of the context definition (docs/context.md). */
bool ch_module_is_system_name(const char *path) {
  static const char *const prefixes[] = {COHORT_SYSTEM_MODULE_PREFIXES};
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
    if (!strncmp(base, prefixes[i], strlen(prefixes[i]))) return true;
  return false;
}

static void read_build_id(struct ch_module *m, const ElfW(Phdr) *ph, uintptr_t bias) {
  const char *p = (const char *)(bias + ph->p_vaddr), *end = p + ph->p_memsz;
  while (p + sizeof(ElfW(Nhdr)) <= end) {
    const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
    const char *name = p + sizeof *n;
    const uint8_t *desc = (const uint8_t *)name + ((n->n_namesz + 3) & ~3u);
    if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
        n->n_descsz <= sizeof m->build_id) {
      memcpy(m->build_id, desc, n->n_descsz);
      m->build_id_len = n->n_descsz;
      return;
    }
    p = (const char *)desc + ((n->n_descsz + 3) & ~3u);
  }
}

static bool known(uintptr_t bias, uintptr_t lo, uintptr_t hi) {
  unsigned n = atomic_load_explicit(&nmods, memory_order_acquire);
  for (unsigned i = 0; i < n; i++)
    if (mods[i].bias == bias && mods[i].lo == lo && mods[i].hi == hi) return true;
  return false;
}

static struct ch_module_hooks hooks;
void ch_modules_set_hooks(const struct ch_module_hooks *h) { hooks = *h; }

static int add_module(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  bool *first = arg;
  bool is_main = *first;
  *first = false;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  bool wx = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      wx |= (ph->p_flags & PF_W) != 0;
      uintptr_t a = info->dlpi_addr + ph->p_vaddr;
      if (a < lo) lo = a;
      if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    }
  }
  if (hi == 0 || known(info->dlpi_addr, lo, hi)) return 0;
  unsigned n = atomic_load(&nmods);
  if (n == MAX_MODULES) return 1;
  struct ch_module *m = &mods[n];
  memset(m, 0, sizeof *m);
  m->bias = info->dlpi_addr;
  m->lo = lo;
  m->hi = hi;
  m->is_main = is_main && (!info->dlpi_name || !info->dlpi_name[0]);
  m->plan_module = -1;
  m->writable_code = wx;
  if (m->is_main) {
    ssize_t r = readlink("/proc/self/exe", paths[n], sizeof paths[n] - 1);
    paths[n][r > 0 ? r : 0] = 0;
  } else {
    strncpy(paths[n], info->dlpi_name ? info->dlpi_name : "", sizeof paths[n] - 1);
  }
  m->path = paths[n];
  m->system = !m->is_main && ch_module_is_system_name(m->path);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_GNU_EH_FRAME) m->eh_frame_hdr = (const uint8_t *)(m->bias + ph->p_vaddr);
    if (ph->p_type == PT_DYNAMIC) m->dynamic = (const void *)(m->bias + ph->p_vaddr);
    if (ph->p_type == PT_NOTE && !m->build_id_len) read_build_id(m, ph, m->bias);
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && m->nload < sizeof m->load / sizeof *m->load) {
      m->load[m->nload].lo = m->bias + ph->p_vaddr;
      m->load[m->nload++].hi = m->bias + ph->p_vaddr + ph->p_memsz;
    }
  }
  if (hooks.found) hooks.found(m);
  atomic_store_explicit(&nmods, n + 1, memory_order_release);
  return 0;
}

static int read_counters(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  unsigned long long *c = arg;
  c[0] = info->dlpi_adds;
  c[1] = info->dlpi_subs;
  return 1;
}

/* Returns false if another thread is refreshing. */
static bool refresh(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&refreshing, &expected, 1)) return false;
  unsigned long long c[2] = {0, 0};
  dl_iterate_phdr(read_counters, c);
  if (c[0] != seen_adds || c[1] != seen_subs || !atomic_load(&nmods)) {
    if (c[1] != seen_subs && atomic_load(&nmods)) {
      atomic_fetch_add(&generation, 1);   /* a module went away: cached rules go stale */
    }
    seen_adds = c[0];
    seen_subs = c[1];
    bool first = true;
    unsigned before = atomic_load(&nmods);
    dl_iterate_phdr(add_module, &first);
    /* Outside the loader's lock: patch the selector sites of new modules. */
    if (hooks.added) hooks.added(before, atomic_load(&nmods));
  }
  atomic_store(&refreshing, 0);
  return true;
}

void ch_modules_refresh(void) { refresh(); }

static const struct ch_module *find(uintptr_t pc) {
  unsigned n = atomic_load_explicit(&nmods, memory_order_acquire);
  for (unsigned i = n; i-- > 0;)   /* newest first: a reused range names the new module */
    if (pc >= mods[i].lo && pc < mods[i].hi) return &mods[i];
  return NULL;
}

const struct ch_module *ch_module_find(uintptr_t pc, bool *busy) {
  const struct ch_module *m = find(pc);
  if (m) return m;
  if (!refresh()) { *busy = true; return NULL; }
  return find(pc);
}
const struct ch_module *ch_module_for(uintptr_t pc) {
  bool busy;
  return ch_module_find(pc, &busy);
}

const char *ch_base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

bool ch_module_is(const struct ch_module *m, const uint8_t *build_id, unsigned build_id_len, const char *path) {
  if (build_id_len) return build_id_len == m->build_id_len && !memcmp(build_id, m->build_id, build_id_len);
  return !strcmp(path, m->path) || !strcmp(ch_base_name(path), ch_base_name(m->path));
}

int ch_module_place(uintptr_t pc, uintptr_t *offset) {
  const struct ch_module *m = ch_module_for(pc);
  *offset = m ? pc - m->bias : pc;
  return m ? (int)(m - mods) : -1;
}

/* Modules of the process at fork stay valid in the child; only the flag
 * could be left set by a thread that no longer exists. */
void ch_modules_atfork_prepare(void) {}
void ch_modules_atfork_parent(void) {}
void ch_modules_atfork_child(void) { atomic_store(&refreshing, 0); }

bool ch_module_maps(const struct ch_module *m, uintptr_t a, size_t len) {
  for (unsigned i = 0; i < m->nload; i++)
    if (a >= m->load[i].lo && a + len <= m->load[i].hi && a + len >= a) return true;
  return false;
}

/* An address the dynamic section holds: glibc relocates most of them in
 * place (x86-64's dynamic section is writable), but a loader need not, so a
 * value below the load bias is still a file address. */
static uintptr_t dyn_addr(const struct ch_module *m, uintptr_t v) { return v < m->bias ? v + m->bias : v; }

/* The relocations of one table whose target is slot: the first one's symbol. */
static const char *reloc_symbol(const struct ch_module *m, uintptr_t table, size_t size, uintptr_t slot,
                                uintptr_t symtab, uintptr_t strtab, size_t strsz) {
  if (!table || !size || !ch_module_maps(m, table, size)) return NULL;
  for (const ElfW(Rela) *r = (const ElfW(Rela) *)table; (uintptr_t)(r + 1) <= table + size; r++) {
    if (r->r_offset + m->bias != slot) continue;
    unsigned type = ELF64_R_TYPE(r->r_info);
    if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) return NULL;
    if (!symtab) return NULL;
    const ElfW(Sym) *sym = (const ElfW(Sym) *)symtab + ELF64_R_SYM(r->r_info);
    if (!ch_module_maps(m, (uintptr_t)sym, sizeof *sym) || sym->st_name >= strsz ||
        !ch_module_maps(m, strtab + sym->st_name, 1))
      return NULL;
    const char *name = (const char *)strtab + sym->st_name;
    /* The name must end inside the string table. */
    return memchr(name, 0, strsz - sym->st_name) ? name : NULL;
  }
  return NULL;
}

const char *ch_module_slot_symbol(const struct ch_module *m, uintptr_t slot) {
  if (!m->dynamic) return NULL;
  uintptr_t jmprel = 0, rela = 0, symtab = 0, strtab = 0;
  size_t pltrelsz = 0, relasz = 0, strsz = 0;
  bool pltrela = true;
  for (const ElfW(Dyn) *d = m->dynamic; ch_module_maps(m, (uintptr_t)d, sizeof *d) && d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
    case DT_JMPREL: jmprel = dyn_addr(m, d->d_un.d_ptr); break;
    case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
    case DT_PLTREL: pltrela = d->d_un.d_val == DT_RELA; break;
    case DT_RELA: rela = dyn_addr(m, d->d_un.d_ptr); break;
    case DT_RELASZ: relasz = d->d_un.d_val; break;
    case DT_SYMTAB: symtab = dyn_addr(m, d->d_un.d_ptr); break;
    case DT_STRTAB: strtab = dyn_addr(m, d->d_un.d_ptr); break;
    case DT_STRSZ: strsz = d->d_un.d_val; break;
    }
  }
  if (!strtab || !strsz || !ch_module_maps(m, strtab, strsz)) return NULL;
  const char *name = pltrela ? reloc_symbol(m, jmprel, pltrelsz, slot, symtab, strtab, strsz) : NULL;
  return name ? name : reloc_symbol(m, rela, relasz, slot, symtab, strtab, strsz);
}

/* For plan.c: every module loaded so far. */
unsigned ch_modules_count(void) { return atomic_load(&nmods); }
struct ch_module *ch_modules_at(unsigned i) { return &mods[i]; }
