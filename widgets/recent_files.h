#pragma once
// Most-recently-used lists kept in QSettings (organization "BitLens", application "BitLens"),
// newest first, without duplicates.

#include <QString>
#include <QStringList>

namespace bitlens::widgets {

/// One most-recently-used list stored under a QSettings key.
class RecentFiles {
public:
    /// A list stored under `key` ("recentModels"), holding at most `maxEntries` entries.
    explicit RecentFiles(QString key, int maxEntries = 10);

    /// The entries, newest first.
    QStringList entries() const;
    /// Puts `entry` (a path or a zoo name) first; an existing copy moves up.
    void add(const QString& entry);
    /// Drops `entry`.
    void remove(const QString& entry);
    /// Empties the list.
    void clear();

private:
    void store(const QStringList& entries) const;

    QString m_key;
    int m_maxEntries;
};

} // namespace bitlens::widgets
