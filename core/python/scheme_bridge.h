// Schemes written in Python (python/pelab/scheme.py, docs/python-schemes.md) as pelab schemes:
// a config's `schemes:` files are imported, each pelab.Scheme subclass joins the scheme
// registry (core/encodings/registry.h), and a run builds a PythonScheme around an instance.
// Its torch.nn.Parameters and buffers are registered as the C++ module's own (the same tensors),
// so the trainer, checkpoints, run files and device moves treat them as a built-in scheme's.
//
// Two hosts: the pelab command embeds Python (started on the first scheme file, never when a
// config names none); the extension module (import pelab) runs inside Python already. Each hook
// takes the GIL for its call only.
#pragma once

#include <string>
#include <vector>

#include "core/config/config.h"

namespace pelab {

// Installs the loader of `schemes:` files (set_scheme_file_loader). `embedded`: this process
// is not Python (the pelab command), so the first file starts an interpreter.
void install_python_scheme_loader(bool embedded);

// Imports one file (once per process: a file loaded again returns its entries) and registers
// its schemes; std::runtime_error with a one-line message (the file and line of the problem).
Catalog load_python_scheme_file(const std::string& path);

}  // namespace pelab
