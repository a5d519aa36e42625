#include "jobs/progress.h"

#include <algorithm>

namespace bitlens {

void Progress::report(double fraction, const std::string& stage)
{
    fraction = std::clamp(fraction, 0.0, 1.0);
    {
        std::lock_guard lock(m_mutex);
        m_stage = stage;
    }
    m_fraction.store(fraction);
    if (m_callback)
        m_callback(fraction, stage);
}

std::string Progress::stage() const
{
    std::lock_guard lock(m_mutex);
    return m_stage;
}

Progress& Progress::none()
{
    thread_local Progress silent;
    return silent;
}

} // namespace bitlens
