#include "recent_files.h"

#include <QSettings>

#include <utility>

namespace bitlens::widgets {

namespace {

QSettings settings() { return QSettings(QStringLiteral("BitLens"), QStringLiteral("BitLens")); }

} // namespace

RecentFiles::RecentFiles(QString key, int maxEntries)
    : m_key(std::move(key)), m_maxEntries(maxEntries)
{
}

QStringList RecentFiles::entries() const { return settings().value(m_key).toStringList(); }

void RecentFiles::add(const QString& entry)
{
    QStringList list = entries();
    list.removeAll(entry);
    list.prepend(entry);
    while (list.size() > m_maxEntries)
        list.removeLast();
    store(list);
}

void RecentFiles::remove(const QString& entry)
{
    QStringList list = entries();
    list.removeAll(entry);
    store(list);
}

void RecentFiles::clear() { store({}); }

void RecentFiles::store(const QStringList& entries) const
{
    QSettings s = settings();
    s.setValue(m_key, entries);
}

} // namespace bitlens::widgets
