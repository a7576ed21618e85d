"""The little ELF reading Cohort needs: is a file an x86-64 ELF object, and
what is its GNU build id. Plain Python, no readelf."""

import struct

EM_X86_64 = 62
PT_NOTE = 4
PT_INTERP = 3
NT_GNU_BUILD_ID = 3


def _header(f):
    ident = f.read(64)
    if len(ident) < 64 or ident[:4] != b"\x7fELF":
        return None
    return ident


def kind(path):
    """'x86-64' for a 64-bit x86-64 ELF file, 'script' for '#!', else a short
    description of what it is instead."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as e:
        return f"unreadable ({e.strerror})"
    if head[:2] == b"#!":
        return "script"
    if head[:4] != b"\x7fELF":
        return "not an ELF file"
    if head[4] != 2 or head[5] != 1:
        return "a 32-bit or big-endian ELF file"
    machine = struct.unpack_from("<H", head, 18)[0]
    if machine != EM_X86_64:
        return f"an ELF file for machine {machine}, not x86-64"
    return "x86-64"


def _program_headers(f):
    """[(p_type, p_offset, p_filesz)] of a 64-bit little-endian ELF file, or
    None if f is not one."""
    ident = _header(f)
    if ident is None or ident[4] != 2 or ident[5] != 1:
        return None
    phoff, = struct.unpack_from("<Q", ident, 32)
    phentsize, phnum = struct.unpack_from("<HH", ident, 54)
    f.seek(phoff)
    phdrs = f.read(phentsize * phnum)
    out = []
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", phdrs, i * phentsize)
        out.append((p_type, p_offset, p_filesz))
    return out


def build_id(path):
    """The GNU build id as lowercase hex, or None if the file has none or
    cannot be read."""
    try:
        with open(path, "rb") as f:
            for p_type, p_offset, p_filesz in _program_headers(f) or ():
                if p_type != PT_NOTE:
                    continue
                f.seek(p_offset)
                found = _find_build_id(f.read(p_filesz))
                if found:
                    return found
    except (OSError, struct.error):
        return None
    return None


def _find_build_id(notes):
    pos = 0
    while pos + 12 <= len(notes):
        namesz, descsz, ntype = struct.unpack_from("<III", notes, pos)
        pos += 12
        name = notes[pos:pos + namesz]
        pos += (namesz + 3) & ~3
        desc = notes[pos:pos + descsz]
        pos += (descsz + 3) & ~3
        if ntype == NT_GNU_BUILD_ID and name.rstrip(b"\0") == b"GNU":
            return desc.hex()
    return None



def is_program(path):
    """True for an executable that asks for a dynamic loader (a main program,
    PIE or not), False for shared libraries and anything unreadable."""
    try:
        with open(path, "rb") as f:
            return any(p_type == PT_INTERP for p_type, _, _ in _program_headers(f) or ())
    except (OSError, struct.error):
        return False
