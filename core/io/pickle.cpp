#include "io/pickle.h"

#include <bit>
#include <cstring>
#include <unordered_map>

namespace bitlens::io {

std::string PickleValue::qualifiedName() const
{
    // A Call's callable may itself be a Call (a pickle can REDUCE a REDUCE); a chain of them
    // costs two bytes a link, so it is followed a bounded number of links, not recursively.
    const PickleValue* v = this;
    for (int hop = 0; hop < 16 && v; ++hop) {
        if (v->kind == Kind::Global)
            return v->text + "." + v->name;
        if (v->kind != Kind::Call || v->items.empty())
            return {};
        v = v->items[0];
    }
    return {};
}

const PickleValue* PickleValue::get(const std::string& key) const
{
    if (kind != Kind::Dict)
        return nullptr;
    for (std::size_t i = 0; i + 1 < items.size(); i += 2)
        if (items[i]->kind == Kind::String && items[i]->text == key)
            return items[i + 1];
    return nullptr;
}

namespace {

using Kind = PickleValue::Kind;

/// What went wrong, with the byte offset of the opcode.
struct PickleError {
    std::string message;
};

const char* kindName(Kind k)
{
    switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::Tuple: return "tuple";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Global: return "global";
    case Kind::Call: return "object";
    case Kind::PersistentId: return "persistent id";
    }
    return "?";
}

std::string hexByte(std::uint8_t b)
{
    static const char* digits = "0123456789abcdef";
    return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

} // namespace

/// The parser proper: a stack machine over the opcodes PyTorch emits.
class PickleParser {
public:
    PickleParser(std::span<const std::uint8_t> bytes, const PickleLimits& limits)
        : m_bytes(bytes), m_limits(limits)
    {
    }

    Pickle run()
    {
        while (true) {
            m_opStart = m_pos;
            const std::uint8_t op = u8();
            if (op == '.') {
                if (m_stack.empty())
                    fail("STOP with an empty stack");
                m_pickle.m_root = m_stack.back();
                return std::move(m_pickle);
            }
            step(op);
        }
    }

private:
    [[noreturn]] void fail(const std::string& why) const
    {
        throw PickleError{why + " (opcode at byte " + std::to_string(m_opStart) + ")"};
    }

    const std::uint8_t* take(std::uint64_t n)
    {
        if (n > m_bytes.size() - m_pos)
            fail("the pickle ends early: " + std::to_string(n) + " bytes needed, " +
                 std::to_string(m_bytes.size() - m_pos) + " left");
        const std::uint8_t* p = m_bytes.data() + m_pos;
        m_pos += static_cast<std::size_t>(n);
        return p;
    }
    std::uint8_t u8() { return *take(1); }
    std::uint64_t uintLe(int n)
    {
        const std::uint8_t* p = take(static_cast<std::uint64_t>(n));
        std::uint64_t v = 0;
        for (int i = n - 1; i >= 0; --i)
            v = (v << 8) | p[i];
        return v;
    }
    std::string line()
    {
        const std::size_t start = m_pos;
        while (m_pos < m_bytes.size() && m_bytes[m_pos] != '\n')
            ++m_pos;
        if (m_pos >= m_bytes.size())
            fail("the pickle ends inside a GLOBAL name");
        std::string s(reinterpret_cast<const char*>(m_bytes.data() + start), m_pos - start);
        ++m_pos;
        return s;
    }

    PickleValue* make(Kind kind)
    {
        if (m_pickle.m_arena.size() >= m_limits.maxValues)
            fail("more than " + std::to_string(m_limits.maxValues) + " values");
        m_pickle.m_arena.push_back(std::make_unique<PickleValue>());
        PickleValue* v = m_pickle.m_arena.back().get();
        v->kind = kind;
        return v;
    }
    void push(PickleValue* v)
    {
        if (m_stack.size() >= m_limits.maxStack)
            fail("the pickle stack grows past " + std::to_string(m_limits.maxStack));
        m_stack.push_back(v);
    }
    PickleValue* pop()
    {
        if (m_stack.empty() || (!m_marks.empty() && m_stack.size() <= m_marks.back()))
            fail("an opcode pops an empty stack");
        PickleValue* v = m_stack.back();
        m_stack.pop_back();
        return v;
    }
    PickleValue* top()
    {
        if (m_stack.empty() || (!m_marks.empty() && m_stack.size() <= m_marks.back()))
            fail("an opcode reads an empty stack");
        return m_stack.back();
    }
    /// Everything above the last MARK, which is removed.
    std::vector<PickleValue*> popMark()
    {
        if (m_marks.empty())
            fail("an opcode needs a MARK, and there is none");
        const std::size_t mark = m_marks.back();
        m_marks.pop_back();
        std::vector<PickleValue*> items(m_stack.begin() + static_cast<std::ptrdiff_t>(mark),
                                        m_stack.end());
        m_stack.resize(mark);
        return items;
    }
    PickleValue* text(Kind kind, std::uint64_t n)
    {
        PickleValue* v = make(kind);
        const std::uint8_t* p = take(n);
        v->text.assign(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
        return v;
    }
    PickleValue* integer(std::int64_t i)
    {
        PickleValue* v = make(Kind::Int);
        v->integer = i;
        return v;
    }
    PickleValue* tuple(std::vector<PickleValue*> items)
    {
        PickleValue* v = make(Kind::Tuple);
        v->items = std::move(items);
        return v;
    }
    void memoPut(std::uint64_t index)
    {
        if (m_memo.size() >= m_limits.maxMemo && !m_memo.count(index))
            fail("more than " + std::to_string(m_limits.maxMemo) + " memo entries");
        m_memo[index] = top();
    }
    void memoGet(std::uint64_t index)
    {
        auto it = m_memo.find(index);
        if (it == m_memo.end())
            fail("memo entry " + std::to_string(index) + " is read before it is written");
        push(it->second);
    }
    /// Python's semantics: a string key set twice keeps its first place and its last value.
    /// The places of string keys are indexed per dict (a state dict has 10^4 keys and more;
    /// a scan per key would make a hostile pickle quadratic).
    void setItems(PickleValue* dict, const std::vector<PickleValue*>& kv)
    {
        if (dict->kind != Kind::Dict)
            fail(std::string("SETITEM(S) on a ") + kindName(dict->kind));
        if (kv.size() % 2 != 0)
            fail("SETITEMS with an odd number of keys and values");
        auto& index = m_dictKeys[dict];
        for (std::size_t i = 0; i < kv.size(); i += 2) {
            if (kv[i]->kind == Kind::String) {
                auto [it, added] = index.try_emplace(kv[i]->text, dict->items.size());
                if (!added) {
                    dict->items[it->second + 1] = kv[i + 1];
                    continue;
                }
            }
            dict->items.push_back(kv[i]);
            dict->items.push_back(kv[i + 1]);
        }
    }
    void append(PickleValue* list, const std::vector<PickleValue*>& items)
    {
        if (list->kind != Kind::List)
            fail(std::string("APPEND(S) on a ") + kindName(list->kind));
        list->items.insert(list->items.end(), items.begin(), items.end());
    }
    PickleValue* call(PickleValue* callable, PickleValue* args)
    {
        if (args->kind != Kind::Tuple)
            fail(std::string("a call's arguments are a ") + kindName(args->kind) +
                 ", not a tuple");
        // collections.OrderedDict() is an ordinary dict to us (torch.save's state dicts).
        if (callable->kind == Kind::Global && callable->text == "collections" &&
            callable->name == "OrderedDict" && args->items.empty())
            return make(Kind::Dict);
        PickleValue* v = make(Kind::Call);
        v->items = {callable, args};
        return v;
    }

    void step(std::uint8_t op)
    {
        switch (op) {
        case 0x80: (void)u8(); break;                  // PROTO
        case 0x95: (void)uintLe(8); break;             // FRAME: a length hint only
        case '(':
            if (m_marks.size() >= m_limits.maxStack)
                fail("too many MARKs");
            m_marks.push_back(m_stack.size());
            break;
        case '0': (void)pop(); break;                  // POP
        case '1': (void)popMark(); break;              // POP_MARK
        case '2': push(top()); break;                  // DUP
        case 'N': push(make(Kind::None)); break;
        case 0x88:
        case 0x89: {
            PickleValue* v = make(Kind::Bool);
            v->boolean = op == 0x88;
            push(v);
            break;
        }
        case 'J': push(integer(static_cast<std::int32_t>(uintLe(4)))); break;  // BININT
        case 'K': push(integer(u8())); break;                                   // BININT1
        case 'M': push(integer(static_cast<std::int64_t>(uintLe(2)))); break;   // BININT2
        case 0x8a: {                                                            // LONG1
            const int n = u8();
            if (n > 8)
                fail("an integer of " + std::to_string(n) + " bytes does not fit 64 bits");
            std::uint64_t v = n == 0 ? 0 : uintLe(n);
            if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1)
                v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
            push(integer(static_cast<std::int64_t>(v)));
            break;
        }
        case 'G': {                                                             // BINFLOAT
            const std::uint8_t* p = take(8);
            std::uint64_t bits = 0;
            for (int i = 0; i < 8; ++i)
                bits = (bits << 8) | p[i];  // big-endian
            PickleValue* v = make(Kind::Float);
            v->number = std::bit_cast<double>(bits);
            push(v);
            break;
        }
        case 'X': push(text(Kind::String, uintLe(4))); break;     // BINUNICODE
        case 0x8c: push(text(Kind::String, u8())); break;         // SHORT_BINUNICODE
        case 0x8d: push(text(Kind::String, uintLe(8))); break;    // BINUNICODE8
        case 'T': push(text(Kind::String, uintLe(4))); break;     // BINSTRING
        case 'U': push(text(Kind::String, u8())); break;          // SHORT_BINSTRING
        case 'B': push(text(Kind::Bytes, uintLe(4))); break;      // BINBYTES
        case 'C': push(text(Kind::Bytes, u8())); break;           // SHORT_BINBYTES
        case 0x8e: push(text(Kind::Bytes, uintLe(8))); break;     // BINBYTES8
        case ')': push(tuple({})); break;                         // EMPTY_TUPLE
        case 't': push(tuple(popMark())); break;                  // TUPLE
        case 0x85:
        case 0x86:
        case 0x87: {                                              // TUPLE1..3
            std::vector<PickleValue*> items(static_cast<std::size_t>(op - 0x84));
            for (auto it = items.rbegin(); it != items.rend(); ++it)
                *it = pop();
            push(tuple(std::move(items)));
            break;
        }
        case ']': push(make(Kind::List)); break;                  // EMPTY_LIST
        case 'l': {                                               // LIST
            PickleValue* v = make(Kind::List);
            v->items = popMark();
            push(v);
            break;
        }
        case 'a': {                                               // APPEND
            PickleValue* item = pop();
            append(top(), {item});
            break;
        }
        case 'e': {                                               // APPENDS
            auto items = popMark();
            append(top(), items);
            break;
        }
        case '}': push(make(Kind::Dict)); break;                  // EMPTY_DICT
        case 'd': {                                               // DICT
            auto kv = popMark();
            PickleValue* v = make(Kind::Dict);
            setItems(v, kv);
            push(v);
            break;
        }
        case 's': {                                               // SETITEM
            PickleValue* value = pop();
            PickleValue* key = pop();
            setItems(top(), {key, value});
            break;
        }
        case 'u': {                                               // SETITEMS
            auto kv = popMark();
            setItems(top(), kv);
            break;
        }
        case 'c': {                                               // GLOBAL
            PickleValue* v = make(Kind::Global);
            v->text = line();
            v->name = line();
            push(v);
            break;
        }
        case 0x93: {                                              // STACK_GLOBAL
            PickleValue* name = pop();
            PickleValue* module = pop();
            if (name->kind != Kind::String || module->kind != Kind::String)
                fail("STACK_GLOBAL needs two strings");
            PickleValue* v = make(Kind::Global);
            v->text = module->text;
            v->name = name->text;
            push(v);
            break;
        }
        case 'R':                                                 // REDUCE
        case 0x81: {                                              // NEWOBJ
            PickleValue* args = pop();
            PickleValue* callable = pop();
            push(call(callable, args));
            break;
        }
        case 'b': {                                               // BUILD
            PickleValue* state = pop();
            PickleValue* object = top();
            // Objects, and dicts with attributes (a state dict's _metadata).
            if (object->kind != Kind::Call && object->kind != Kind::Dict)
                fail(std::string("BUILD on a ") + kindName(object->kind));
            object->state = state;
            break;
        }
        case 'Q': {                                               // BINPERSID
            PickleValue* v = make(Kind::PersistentId);
            v->items = {pop()};
            push(v);
            break;
        }
        case 'q': memoPut(u8()); break;                           // BINPUT
        case 'r': memoPut(uintLe(4)); break;                      // LONG_BINPUT
        case 0x94: memoPut(m_memo.size()); break;                 // MEMOIZE
        case 'h': memoGet(u8()); break;                           // BINGET
        case 'j': memoGet(uintLe(4)); break;                      // LONG_BINGET
        default:
            fail("unsupported pickle opcode " + hexByte(op) +
                 " (BitLens reads the opcodes PyTorch writes and never runs code)");
        }
    }

    std::span<const std::uint8_t> m_bytes;
    PickleLimits m_limits;
    std::size_t m_pos = 0;
    std::size_t m_opStart = 0;
    std::vector<PickleValue*> m_stack;
    std::vector<std::size_t> m_marks;
    std::unordered_map<std::uint64_t, PickleValue*> m_memo;
    /// dict -> string key -> index of the key in its items
    std::unordered_map<const PickleValue*, std::unordered_map<std::string, std::size_t>> m_dictKeys;
    Pickle m_pickle;
};

Result<Pickle> parsePickle(std::span<const std::uint8_t> bytes, const std::string& path,
                           const PickleLimits& limits)
{
    try {
        return PickleParser(bytes, limits).run();
    } catch (const PickleError& e) {
        return Error::badInput(path, e.message);
    } catch (const std::bad_alloc&) {
        return Error::badInput(path, "the pickle needs more memory than is available");
    }
}

} // namespace bitlens::io
