#pragma once
// A minimal, safe reader of Python pickles: the opcodes PyTorch writes into TorchScript and
// torch.save archives (protocol 2 to 5). Nothing is ever called or imported: a GLOBAL becomes
// a named reference, REDUCE / NEWOBJ a record of "callable applied to arguments", BUILD stores
// the state beside it, and persistent ids (storages) stay values for the caller to resolve.
// Every length is checked against the bytes left, and the stack, memo and value count are
// bounded, so a hostile pickle is an error, never a crash or a runaway allocation.

#include "jobs/result.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace bitlens::io {

/// One unpickled value. Containers point into the arena of the Pickle that owns them (so shared
/// and even cyclic references, which the memo allows, cost nothing and leak nothing).
struct PickleValue {
    enum class Kind {
        None,
        Bool,
        Int,
        Float,
        String,        ///< text (UTF-8 as stored)
        Bytes,
        Tuple,
        List,
        Dict,          ///< items = key, value, key, value, ... in insertion order
        Global,        ///< a reference to module.name (text = module, name = name)
        Call,          ///< items = [callable, args tuple] (+ state after BUILD): REDUCE / NEWOBJ
        PersistentId,  ///< items = [pid]: what BINPERSID received
    };
    Kind kind = Kind::None;
    bool boolean = false;
    std::int64_t integer = 0;
    double number = 0.0;
    std::string text;  ///< String / Bytes contents; Global: module
    std::string name;  ///< Global: attribute name
    std::vector<PickleValue*> items;
    PickleValue* state = nullptr;  ///< Call / Dict: what BUILD set (null if none)

    /// "module.name" of a Global, of a Call's callable, else "".
    std::string qualifiedName() const;
    /// Dict: the value stored under the string key `key`, else null.
    const PickleValue* get(const std::string& key) const;
};

/// A parsed pickle: the root value and the arena that owns every value.
class Pickle {
public:
    const PickleValue* root() const { return m_root; }

private:
    friend class PickleParser;
    std::vector<std::unique_ptr<PickleValue>> m_arena;
    PickleValue* m_root = nullptr;
};

/// Limits of parsePickle (a real TorchScript data.pkl of a 1B-parameter model has ~10^5 values).
struct PickleLimits {
    std::size_t maxValues = 50'000'000;
    std::size_t maxStack = 1'000'000;
    std::size_t maxMemo = 10'000'000;
};

/// Parses `bytes` (one pickle up to STOP). `path` names the source in errors ("<file>:
/// data.pkl: unsupported pickle opcode 0x63 at byte 12", "... ends inside an opcode at byte 9").
Result<Pickle> parsePickle(std::span<const std::uint8_t> bytes, const std::string& path,
                           const PickleLimits& limits = {});

} // namespace bitlens::io
