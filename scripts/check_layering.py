#!/usr/bin/env python3
"""Checks that no #include runs back up: between the top-level modules against DESIGN.md's
arrows, and between the folders inside a module against their order (bottom to top).

    scripts/check_layering.py [SOURCE_DIR]

Reads every #include "..." of the product's sources (*.h, *.cc, *.cu, *.cuh; bench/, tests/,
fuzz/, build trees and each module's tests/ folders are not the product: their includes are not
checked here) and prints one line per include that breaks the layering, as
"FILE:LINE: includes PATH: MODULE may not include MODULE (DESIGN.md)" or "...: FOLDER is below
FOLDER in MODULE/", then exits 1; exits 0 when there is none. An include listed in KNOWN (a
layering break someone owns, with its issue) is let through; one listed there that no longer
occurs is an error too, so the list only shrinks.
"""
import os
import re
import sys

# DESIGN.md's dependency direction: an arrow means "may include" (a module may always include
# itself). "dltune" is the generated configuration header (dltune/config.h), for everyone.
ALLOWED = {
    "common": set(),
    "topology": {"common"},
    "recipes": {"common"},
    "comm": {"common"},
    "planning": {"recipes", "common"},
    "engine": {"planning", "comm", "recipes", "common"},
    "tuner/db": {"topology", "recipes", "common"},
    "tuner": {"tuner/db", "comm", "topology", "recipes", "common"},
    "predict": {"tuner/db", "planning", "topology", "recipes", "common"},
    # DESIGN.md's arrow for the launcher names no planning/, but its module list has planning
    # "used by engine, predict and launcher alike": the launcher plans layouts in its process.
    "launcher": {"predict", "tuner", "tuner/db", "engine", "planning", "comm", "topology",
                 "recipes", "common"},
    "plugins": {"tuner/db", "topology", "recipes", "common"},
}
EVERYONE = {"dltune"}

# Folders inside a module, bottom to top: a folder includes its own and lower ones only
# (folders on one level do not include each other). Files directly in the module's folder
# are its top.
LEVELS = {
    "engine": [["core"], ["ops"], ["graph"], ["gpu"], ["optim", "data", "io"], ["train"],
               ["worker"]],
    # launcher/CMakeLists.txt: the floors of the dltune command.
    "launcher": [["backend"], ["flow"], ["report"], ["cli"]],
}

# Layering breaks with an owner: (file, included path) -> why it is let through for now.
KNOWN = {
    ("predict/predict.h", "tuner/cost_model.h"):
        "predict's allreduce curves are the tuner's cost model (DESIGN.md: predict -> tuner/db)",
}

SOURCES = (".h", ".cc", ".cu", ".cuh")
NOT_PRODUCT = {"bench", "tests", "fuzz", "scripts", "cmake", "build", ".git"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(path):
    """The module of a repository path ("tuner/db" for tuner/db/...), or None outside them."""
    parts = path.split("/")
    if parts[0] == "tuner" and len(parts) > 2 and parts[1] == "db":
        return "tuner/db"
    return parts[0] if parts[0] in ALLOWED or parts[0] in EVERYONE else None


def level_of(module, path):
    """(level, folder) of `path` inside `module`, or None where the module has no levels."""
    levels = LEVELS.get(module)
    if levels is None:
        return None
    parts = path.split("/")
    folder = parts[1] if len(parts) > 2 else ""
    for i, names in enumerate(levels):
        if folder in names:
            return i, folder
    return len(levels), folder  # the module's own top


def product_files(root):
    for top in sorted(os.listdir(root)):
        if top in NOT_PRODUCT or top.startswith(".") or not os.path.isdir(os.path.join(root, top)):
            continue
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if d != "tests")
            for name in sorted(filenames):
                if name.endswith(SOURCES):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def problems(root):
    found, seen_known = [], set()
    for path in product_files(root):
        src = module_of(path)
        if src is None or src in EVERYONE:
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            dst = module_of(target)
            if dst is None:
                continue  # a header of a third-party library or of a generated file
            why = None
            if dst != src and dst not in ALLOWED[src] and dst not in EVERYONE:
                if not (src == "tuner" and dst == "tuner/db"):
                    why = f"{src}/ may not include {dst}/ (DESIGN.md)"
            elif dst == src:
                a, b = level_of(src, path), level_of(src, target)
                if a is not None and b is not None and (b[0] > a[0] or
                                                        (b[0] == a[0] and b[1] != a[1])):
                    why = (f"{src}/{b[1]}/ is not below {src}/{a[1]}/ "
                           f"(the order of {src}/'s folders, bottom to top: "
                           + " < ".join("|".join(n) for n in LEVELS[src]) + ")")
            if why is None:
                continue
            if (path, target) in KNOWN:
                seen_known.add((path, target))
                continue
            found.append(f"{path}:{number}: includes {target}: {why}")
    for key, reason in sorted(KNOWN.items()):
        if key not in seen_known:
            found.append(f"{key[0]}: no longer includes {key[1]}: drop it from KNOWN in "
                         f"scripts/check_layering.py ({reason})")
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    found = problems(os.path.abspath(root))
    for p in found:
        print(p)
    if found:
        print(f"check_layering: {len(found)} include(s) break the layering", file=sys.stderr)
        return 1
    print("check_layering: no include runs back up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
