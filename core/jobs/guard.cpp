#include "jobs/guard.h"

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <new>
#include <stdexcept>

namespace bitlens {

Error errorFromException(std::exception_ptr thrown, const Boundary& boundary)
{
    try {
        std::rethrow_exception(thrown);
    } catch (const ErrorException& e) {
        return e.error;
    } catch (const std::bad_alloc&) {
        return Error::runtime(boundary.oomWhile.empty() ? "out of memory"
                                                        : "out of memory while " + boundary.oomWhile,
                              boundary.path);
    } catch (const c10::Error& e) {
        return Error{boundary.library, boundary.libraryPrefix + e.what_without_backtrace(),
                     boundary.path, std::nullopt};
    } catch (const nlohmann::json::exception& e) {
        if (boundary.jsonWhere.empty())
            return Error::runtime(e.what(), boundary.path);
        return Error{boundary.library,
                     boundary.jsonWhere + ": a value of the wrong type (" + e.what() + ")",
                     boundary.path, std::nullopt};
    } catch (const std::length_error& e) {
        return Error::badInput(boundary.path, std::string("size out of range: ") + e.what());
    } catch (const std::invalid_argument& e) {
        return Error{ErrorCode::BadInput, e.what(), boundary.path, std::nullopt};
    } catch (const std::exception& e) {
        return Error::runtime(e.what(), boundary.path);
    } catch (...) {
        return Error::runtime("an unknown exception", boundary.path);
    }
}

} // namespace bitlens
