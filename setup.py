"""Build the rbcd Cython extensions.

OpenMP is used when the compiler can build and link a tiny ``#pragma omp``
program; otherwise the kernels are built serial and a warning is printed.
Cython directives are set here, in one place. ``RBCD_DEBUG=1`` builds with
bounds checking and wraparound on (slow, for hunting memory errors).
``RBCD_BUILD_ONLY=_cd,_binning`` (last parts of the module names) restricts the build to some modules (a
developer convenience for in-place rebuilds).

Never add fast-math style flags (no unsafe float optimizations): binning must
match rbcd_ref bit for bit, and -ffp-contract=off keeps FMA contraction out.
"""
import os
import shutil
import sys
import tempfile
import textwrap

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Every extension module, by dotted name; its source is the matching .pyx under rbcd/.
MODULES = [
    "rbcd._openmp_info",
    "rbcd.binning._binning",
    "rbcd.solvers._cd",
    "rbcd.solvers._sparse",
    "rbcd.solvers._gram",
    "rbcd.related._fourier",
    "rbcd.related._dsekl",
    "rbcd.dask._kernels",
]

DEBUG = os.environ.get("RBCD_DEBUG", "0") not in ("", "0")
DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "nonecheck": False,
    "embedsignature": True,
}


def _openmp_flags(compiler):
    """Return (compile_args, link_args) for OpenMP, or ([], []) if it fails."""
    if sys.platform == "win32":
        cand = (["/openmp"], [])
    else:
        cand = (["-fopenmp"], ["-fopenmp"])
    src = textwrap.dedent(
        """
        #include <omp.h>
        #include <stdio.h>
        int main(void) {
            int n = 0;
            #pragma omp parallel reduction(+:n)
            n += 1;
            printf("%d %d\\n", n, omp_get_max_threads());
            return 0;
        }
        """
    )
    tmp = tempfile.mkdtemp()
    try:
        path = os.path.join(tmp, "omp_probe.c")
        with open(path, "w") as f:
            f.write(src)
        objs = compiler.compile([path], output_dir=tmp, extra_postargs=cand[0])
        compiler.link_executable(objs, "omp_probe", output_dir=tmp, extra_postargs=cand[1])
        return cand
    except Exception:  # any compile or link failure means: no OpenMP
        return [], []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class BuildExt(build_ext):
    def build_extensions(self):
        cflags, lflags = _openmp_flags(self.compiler)
        if not cflags:
            msg = (
                "\n" + "*" * 72 + "\n"
                "WARNING: the compiler cannot build OpenMP code; rbcd's kernels are\n"
                "being built SERIAL (correct, but one thread). Install a compiler\n"
                "with OpenMP support (gcc, or clang with libomp) for parallel kernels.\n"
                + "*" * 72 + "\n"
            )
            print(msg, file=sys.stderr)
        for ext in self.extensions:
            ext.extra_compile_args = list(ext.extra_compile_args or []) + cflags
            ext.extra_link_args = list(ext.extra_link_args or []) + lflags
            ext.define_macros = list(ext.define_macros or []) + [
                ("RBCD_OPENMP", "1" if cflags else "0")
            ]
        super().build_extensions()

    def run(self):
        super().run()
        if self.inplace:
            return
        # Also place each compiled module next to its .pyx, as an in-place build
        # would. The README runs `pip install . && python -m rbcd demo` from the
        # checkout, where `python -m` puts the checkout's rbcd/ first on sys.path;
        # without this copy that package would have no compiled modules.
        here = os.path.dirname(os.path.abspath(__file__))
        for ext in self.extensions:
            built = self.get_ext_fullpath(ext.name)
            target = os.path.join(here, self.get_ext_filename(ext.name))
            if os.path.exists(built) and os.path.isdir(os.path.dirname(target)):
                try:
                    shutil.copyfile(built, target)
                except OSError as exc:  # read-only checkout: the installed copy still works
                    print(f"note: could not copy {built} to {target}: {exc}", file=sys.stderr)


def extensions():
    only = os.environ.get("RBCD_BUILD_ONLY", "").strip()
    names = MODULES
    if only:
        wanted = {s.strip() for s in only.split(",")}
        names = [m for m in names if m.rsplit(".", 1)[-1] in wanted]
    opt = ["-O0", "-g"] if DEBUG else ["-O3"]
    if sys.platform != "win32":
        opt.append("-ffp-contract=off")  # no FMA contraction: iterates match rbcd_ref
    exts = [
        Extension(
            m,
            [m.replace(".", "/") + ".pyx"],
            include_dirs=[numpy.get_include(), "rbcd/src"],
            extra_compile_args=opt,
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        )
        for m in names
    ]
    # the generated C goes under build/ (not beside the .pyx sources): the package
    # directories hold only what is written by hand
    return cythonize(exts, compiler_directives=DIRECTIVES, quiet=True,
                     build_dir=os.path.join("build", "cython"))


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
