#include "io/torchscript.h"

#include "io/file_util.h"
#include "io/pickle.h"
#include "io/zip.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <set>
#include <sstream>

namespace bitlens::io {

namespace {

using Kind = PickleValue::Kind;

/// Thrown inside the reader; becomes an Error at the boundary.
struct ArchiveError {
    Error error;
};

/// torch's legacy typed storage classes (what torch.jit.save and torch.save write).
struct StorageType {
    const char* name;
    at::ScalarType type;
    const char* dtype;
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", at::kFloat, "float32"},     {"DoubleStorage", at::kDouble, "float64"},
    {"HalfStorage", at::kHalf, "float16"},       {"BFloat16Storage", at::kBFloat16, "bfloat16"},
    {"LongStorage", at::kLong, "int64"},         {"IntStorage", at::kInt, "int32"},
    {"ShortStorage", at::kShort, "int16"},       {"CharStorage", at::kChar, "int8"},
    {"ByteStorage", at::kByte, "uint8"},         {"BoolStorage", at::kBool, "bool"},
};

/// Most nested modules / containers followed (a cyclic pickle stops here).
constexpr int kMaxDepth = 64;
/// Most entries of modules / dicts one walk looks at: the memo lets a pickle of a few hundred
/// bytes refer to one dict twice at each of 64 levels (2^64 paths), or to a dict of 10^4 keys
/// from every level; a real archive looks at each entry once (10^5 for a large state dict).
constexpr std::size_t kMaxSteps = 1'000'000;
/// Longest module path + tensor name ("encoder.layers.11.self_attn.in_proj_weight" is 42).
constexpr std::size_t kMaxName = 4096;
/// What reading takes (tensor copies, tensor and module names, kEntryCost per tensor and module
/// found) may be at most this many times the file's bytes, plus kSlackBytes: a view re-reads its
/// storage (tied weights twice, a stride-0 view of one element any number of times) and a
/// shared dict is found under every path to it, so a small file could otherwise claim gigabytes.
constexpr std::uint64_t kMaxExpansion = 4;
constexpr std::uint64_t kSlackBytes = 64ull << 20;
constexpr std::uint64_t kEntryCost = 256;

std::string shapeText(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

class ArchiveReader {
public:
    explicit ArchiveReader(std::string path) : m_path(std::move(path)) {}

    TorchArchive read()
    {
        auto bytes = readFileBytes(m_path);
        if (!bytes)
            throw ArchiveError{bytes.error()};
        m_bytes = std::move(bytes).value();
        if (m_bytes.size() >= 2 && m_bytes[0] == 0x80 && m_bytes[1] >= 2 && m_bytes[1] <= 5)
            throw ArchiveError{Error::unsupported(
                m_path, "is a legacy torch.save file (a bare pickle, as PyTorch before 1.6 "
                        "wrote it); BitLens reads the zip format torch.save writes since 1.6")};
        auto entries = listZipEntries(m_bytes, m_path);
        if (!entries)
            throw ArchiveError{entries.error()};
        for (const auto& e : *entries)
            if (!m_entries.emplace(e.name, e).second)
                fail("the archive holds two members named '" + e.name +
                     "' (which one torch would read is not defined)");
        m_budget = kMaxExpansion * m_bytes.size() + kSlackBytes;
        m_memberBudget = kMaxExpansion * 4 * m_bytes.size() + kSlackBytes;
        findPrefix();
        TorchArchive archive;
        archive.path = m_path;
        for (const auto& [name, e] : m_entries)
            if (name.rfind(m_prefix + "code/", 0) == 0)
                archive.hasCode = true;
        if (auto it = m_entries.find(m_prefix + "byteorder"); it != m_entries.end()) {
            const auto order = member(it->second);
            if (std::string(order.begin(), order.end()) != "little")
                throw ArchiveError{Error::unsupported(
                    m_path, "the archive stores its tensors big-endian; BitLens reads "
                            "little-endian archives")};
        }

        const Pickle data = pickleOf("data.pkl");
        const PickleValue* root = data.root();
        archive.rootClass = root->kind == Kind::Call ? root->qualifiedName() : "";
        walk(archive, root, "", "data/", 0);
        if (archive.hasCode && m_entries.count(m_prefix + "constants.pkl")) {
            const Pickle constants = pickleOf("constants.pkl");
            const PickleValue* c = constants.root();
            if (c->kind == Kind::Tuple)
                for (std::size_t i = 0; i < c->items.size(); ++i)
                    if (const PickleValue* t = tensorRecord(c->items[i]))
                        archive.tensors.push_back(
                            tensor(t, "constants." + std::to_string(i), "constants/"));
        }
        if (archive.hasCode) {
            std::map<std::string, std::map<std::string, std::string>> byClass;
            for (const auto& [module, cls] : archive.moduleClasses) {
                auto it = byClass.find(cls);
                if (it == byClass.end())
                    it = byClass.emplace(cls, finalsOf(cls)).first;
                archive.finals[module] = it->second;
            }
        }
        std::set<std::string> names;
        for (const auto& t : archive.tensors)
            if (!names.insert(t.name).second)
                fail("two tensors are named '" + t.name + "'");
        return archive;
    }

private:
    [[noreturn]] void fail(const std::string& why) const
    {
        throw ArchiveError{Error::badInput(m_path, why)};
    }

    /// Takes `bytes` from what reading may still allocate (see kMaxExpansion).
    void charge(std::uint64_t bytes, const std::string& what)
    {
        if (bytes > m_budget)
            fail("reading " + what + " would take more than " + std::to_string(kMaxExpansion) +
                 " times the file's " + std::to_string(m_bytes.size()) +
                 " bytes (shared entries found under many paths)");
        m_budget -= bytes;
    }

    /// The folder every member sits in ("lstm/"), from the one holding data.pkl.
    void findPrefix()
    {
        for (const auto& [name, e] : m_entries) {
            if (name == "data.pkl") {
                m_prefix.clear();
                return;
            }
            const auto slash = name.find('/');
            if (slash != std::string::npos && name.substr(slash + 1) == "data.pkl") {
                m_prefix = name.substr(0, slash + 1);
                return;
            }
        }
        fail("is a zip archive without data.pkl, so not a TorchScript or torch.save file");
    }

    std::vector<std::uint8_t> member(const ZipEntry& e)
    {
        // torch stores its members; a re-zipped archive may deflate them. Members that
        // decompress to far more than the file (many entries over one deflate stream) are
        // refused before they are inflated.
        if (e.uncompressedSize > m_memberBudget)
            fail("its members decompress to more than " + std::to_string(kMaxExpansion * 4) +
                 " times the file's " + std::to_string(m_bytes.size()) + " bytes (member '" +
                 e.name + "')");
        m_memberBudget -= e.uncompressedSize;
        auto data = extractZipEntry(m_bytes, e, m_path);
        if (!data)
            throw ArchiveError{data.error()};
        return std::move(data).value();
    }

    Pickle pickleOf(const std::string& name)
    {
        auto it = m_entries.find(m_prefix + name);
        if (it == m_entries.end())
            fail("the archive has no " + name);
        const auto bytes = member(it->second);
        auto pickle = parsePickle(bytes, m_path);
        if (!pickle) {
            Error e = pickle.error();
            e.message = name + ": " + e.message;
            throw ArchiveError{e};
        }
        return std::move(pickle).value();
    }

    /// `v` when it is torch's tensor record, also through _rebuild_parameter; else null.
    static const PickleValue* tensorRecord(const PickleValue* v)
    {
        for (int hop = 0; v && v->kind == Kind::Call && hop < 4; ++hop) {
            const std::string fn = v->qualifiedName();
            if (fn == "torch._utils._rebuild_tensor_v2")
                return v;
            if (fn != "torch._utils._rebuild_parameter" &&
                fn != "torch._utils._rebuild_parameter_with_state")
                return nullptr;
            const PickleValue* args = v->items[1];
            v = args->items.empty() ? nullptr : args->items[0];
        }
        return nullptr;
    }

    static bool isModule(const PickleValue* v)
    {
        return v->kind == Kind::Call && v->state && v->state->kind == Kind::Dict &&
               v->items[0]->kind == Kind::Global && v->items[0]->text.rfind("__torch__", 0) == 0;
    }

    /// Collects the tensors under `v`: module attributes (TorchScript objects) and dict entries
    /// (torch.save state dicts). Lists (TorchScript's _flat_weights) repeat tensors: skipped.
    void walk(TorchArchive& archive, const PickleValue* v, const std::string& prefix,
              const std::string& folder, int depth)
    {
        if (depth > kMaxDepth)
            fail("data.pkl nests modules more than " + std::to_string(kMaxDepth) + " deep");
        const PickleValue* dict = nullptr;
        if (isModule(v)) {
            charge(kEntryCost + prefix.size(), "its modules");
            archive.moduleClasses[prefix.empty() ? "" : prefix.substr(0, prefix.size() - 1)] =
                v->qualifiedName();
            dict = v->state;
        } else if (v->kind == Kind::Dict) {
            dict = v;
        } else {
            return;
        }
        m_steps += 1 + dict->items.size() / 2;
        if (m_steps > kMaxSteps)
            fail("walking the modules and dicts of data.pkl takes more than " +
                 std::to_string(kMaxSteps) + " steps (shared references nest too deep)");
        for (std::size_t i = 0; i + 1 < dict->items.size(); i += 2) {
            const PickleValue* key = dict->items[i];
            const PickleValue* value = dict->items[i + 1];
            if (key->kind != Kind::String)
                continue;
            if (prefix.size() + key->text.size() > kMaxName)
                fail("data.pkl names a tensor or module with more than " +
                     std::to_string(kMaxName) + " characters");
            if (const PickleValue* t = tensorRecord(value))
                archive.tensors.push_back(tensor(t, prefix + key->text, folder));
            else if (isModule(value) || value->kind == Kind::Dict)
                walk(archive, value, prefix + key->text + ".", folder, depth + 1);
        }
    }

    /// The bytes of storage `key` in `folder`, read once.
    const std::vector<std::uint8_t>& storage(const std::string& folder, const std::string& key)
    {
        const std::string name = m_prefix + folder + key;
        auto cached = m_storages.find(name);
        if (cached != m_storages.end())
            return cached->second;
        auto it = m_entries.find(name);
        if (it == m_entries.end())
            fail("tensor storage '" + folder + key + "' is missing from the archive");
        return m_storages.emplace(name, member(it->second)).first->second;
    }

    static std::int64_t intOf(const PickleValue* v, bool& ok)
    {
        ok = ok && v->kind == Kind::Int;
        return v->kind == Kind::Int ? v->integer : 0;
    }

    TorchTensor tensor(const PickleValue* record, const std::string& name,
                       const std::string& folder)
    {
        const std::string where = "tensor '" + name + "': ";
        const PickleValue* args = record->items[1];
        if (args->items.size() < 4)
            fail(where + "_rebuild_tensor_v2 has " + std::to_string(args->items.size()) +
                 " arguments, expected at least 4");
        const PickleValue* pid = args->items[0];
        if (pid->kind != Kind::PersistentId || pid->items[0]->kind != Kind::Tuple ||
            pid->items[0]->items.size() < 5)
            fail(where + "its storage is not a ('storage', type, key, location, size) record");
        const auto& p = pid->items[0]->items;
        if (p[0]->kind != Kind::String || p[0]->text != "storage" || p[1]->kind != Kind::Global ||
            p[2]->kind != Kind::String)
            fail(where + "its storage is not a ('storage', type, key, location, size) record");
        const StorageType* type = nullptr;
        for (const auto& t : kStorageTypes)
            if (p[1]->text == "torch" && p[1]->name == t.name)
                type = &t;
        if (!type)
            throw ArchiveError{Error::unsupported(
                m_path, where + "storage type " + p[1]->qualifiedName() + " is not supported")};
        bool ok = true;
        const std::int64_t numel = intOf(p[4], ok);
        const std::int64_t offset = intOf(args->items[1], ok);
        const PickleValue* sizeT = args->items[2];
        const PickleValue* strideT = args->items[3];
        if (!ok || sizeT->kind != Kind::Tuple || strideT->kind != Kind::Tuple ||
            sizeT->items.size() != strideT->items.size() || sizeT->items.size() > 16)
            fail(where + "its offset, size and stride are not integers and tuples of one length");
        std::vector<std::int64_t> size;
        std::vector<std::int64_t> stride;
        for (std::size_t d = 0; d < sizeT->items.size(); ++d) {
            size.push_back(intOf(sizeT->items[d], ok));
            stride.push_back(intOf(strideT->items[d], ok));
        }
        if (!ok || numel < 0 || offset < 0)
            fail(where + "negative or non-integer storage size, offset, size or stride");
        const auto elementSize = static_cast<std::int64_t>(c10::elementSize(type->type));
        const auto& bytes = storage(folder, p[2]->text);
        std::int64_t storageBytes = 0;
        if (__builtin_mul_overflow(numel, elementSize, &storageBytes) ||
            static_cast<std::uint64_t>(storageBytes) > bytes.size())
            fail(where + "storage '" + p[2]->text + "' holds " + std::to_string(numel) +
                 " elements of " + type->dtype + ", more than the " + std::to_string(bytes.size()) +
                 " bytes of its member");
        // The last element the view reads must lie inside the storage.
        std::int64_t last = offset;
        bool empty = false;
        for (std::size_t d = 0; d < size.size(); ++d) {
            if (size[d] < 0 || stride[d] < 0)
                fail(where + "negative size or stride " + shapeText(size));
            if (size[d] == 0)
                empty = true;
            std::int64_t step = 0;
            if (size[d] > 0 && (__builtin_mul_overflow(size[d] - 1, stride[d], &step) ||
                                __builtin_add_overflow(last, step, &last)))
                fail(where + "its shape " + shapeText(size) + " overflows");
        }
        if (!empty && last >= numel)
            fail(where + "shape " + shapeText(size) + " at offset " + std::to_string(offset) +
                 " reads element " + std::to_string(last) + ", past the end of its storage of " +
                 std::to_string(numel) + " elements");
        // What the contiguous copy takes, refused before it is allocated.
        std::uint64_t viewBytes = empty ? 0 : static_cast<std::uint64_t>(elementSize);
        for (std::size_t d = 0; d < size.size() && !empty; ++d)
            if (__builtin_mul_overflow(viewBytes, static_cast<std::uint64_t>(size[d]),
                                       &viewBytes))
                fail(where + "its shape " + shapeText(size) + " overflows");
        if (viewBytes > m_budget)
            fail(where + "shape " + shapeText(size) + " would take " +
                 std::to_string(viewBytes) + " bytes, more than " +
                 std::to_string(kMaxExpansion) + " times the file's " +
                 std::to_string(m_bytes.size()) + " bytes allow (its views repeat storage)");
        m_budget -= viewBytes;
        charge(kEntryCost + name.size(), "its tensors");
        TorchTensor t;
        t.name = name;
        t.dtype = type->dtype;
        t.shape = size;
        if (empty) {
            t.value = at::empty(size, at::TensorOptions().dtype(type->type));
        } else {
            const at::Tensor all = at::from_blob(const_cast<std::uint8_t*>(bytes.data()), {numel},
                                                 at::TensorOptions().dtype(type->type));
            t.value = all.as_strided(size, stride, offset).clone(at::MemoryFormat::Contiguous);
        }
        return t;
    }

    /// "name : Final[type] = value" lines of a class in its code file (text, never run).
    std::map<std::string, std::string> finalsOf(const std::string& qualifiedClass)
    {
        std::map<std::string, std::string> finals;
        const auto dot = qualifiedClass.rfind('.');
        if (dot == std::string::npos)
            return finals;
        std::string file = qualifiedClass.substr(0, dot);
        const std::string cls = qualifiedClass.substr(dot + 1);
        for (auto& c : file)
            if (c == '.')
                c = '/';
        auto it = m_entries.find(m_prefix + "code/" + file + ".py");
        if (it == m_entries.end() || it->second.uncompressedSize > (16u << 20))
            return finals;
        const auto bytes = member(it->second);
        std::istringstream in(std::string(bytes.begin(), bytes.end()));
        std::string line;
        bool inClass = false;
        while (std::getline(in, line)) {
            if (!line.empty() && line[0] != ' ') {
                inClass = line.rfind("class " + cls + "(", 0) == 0;
                continue;
            }
            const auto colon = line.find(" : Final[");
            const auto eq = line.find("] = ");
            if (!inClass || colon == std::string::npos || eq == std::string::npos || eq < colon)
                continue;
            const auto start = line.find_first_not_of(' ');
            std::string value = line.substr(eq + 4);
            if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
                value = value.substr(1, value.size() - 2);
            finals[line.substr(start, colon - start)] = value;
        }
        return finals;
    }

    std::string m_path;
    std::vector<std::uint8_t> m_bytes;
    std::map<std::string, ZipEntry> m_entries;
    std::string m_prefix;
    std::map<std::string, std::vector<std::uint8_t>> m_storages;
    std::size_t m_steps = 0;
    std::uint64_t m_budget = 0;        ///< bytes reading may still allocate
    std::uint64_t m_memberBudget = 0;  ///< bytes the members extracted may still take
};

} // namespace

Result<TorchArchive> readTorchArchive(const std::string& path)
{
    try {
        c10::InferenceMode guard;
        return ArchiveReader(path).read();
    } catch (const ArchiveError& e) {
        return e.error;
    } catch (const c10::Error& e) {
        return Error::badInput(path, std::string("reading a tensor failed: ") +
                                         e.what_without_backtrace());
    } catch (const std::bad_alloc&) {
        return Error::badInput(path, "the archive needs more memory than is available");
    }
}

std::string describeTensors(const TorchArchive& archive, std::size_t limit)
{
    if (archive.tensors.empty())
        return "none";
    std::string text;
    for (std::size_t i = 0; i < archive.tensors.size() && i < limit; ++i) {
        const auto& t = archive.tensors[i];
        text += (i ? ", " : "") + t.name + " " + t.dtype + " " + shapeText(t.shape);
    }
    if (archive.tensors.size() > limit)
        text += ", ... and " + std::to_string(archive.tensors.size() - limit) + " more";
    return text;
}

} // namespace bitlens::io
