#include "layer_names.h"

#include <QMap>
#include <QSet>

#include <algorithm>
#include <map>
#include <set>

namespace bitlens::widgets {

namespace {

bool isBlockWord(const QString& part)
{
    static const QSet<QString> words = {QStringLiteral("layers"), QStringLiteral("layer"),
                                        QStringLiteral("h"),      QStringLiteral("blocks"),
                                        QStringLiteral("block")};
    return words.contains(part);
}

bool isProjection(const QString& part)
{
    static const QSet<QString> known = {
        QStringLiteral("q"),      QStringLiteral("k"),      QStringLiteral("v"),
        QStringLiteral("o"),      QStringLiteral("qkv"),    QStringLiteral("kv"),
        QStringLiteral("gate"),   QStringLiteral("up"),     QStringLiteral("down"),
        QStringLiteral("gate_up"),QStringLiteral("query"),  QStringLiteral("key"),
        QStringLiteral("value"),  QStringLiteral("dense"),  QStringLiteral("fc1"),
        QStringLiteral("fc2"),    QStringLiteral("fc"),     QStringLiteral("c_attn"),
        QStringLiteral("c_proj"), QStringLiteral("c_fc"),   QStringLiteral("out"),
        QStringLiteral("in"),     QStringLiteral("wi"),     QStringLiteral("wo"),
        QStringLiteral("wq"),     QStringLiteral("wk"),     QStringLiteral("wv"),
        QStringLiteral("w1"),     QStringLiteral("w2"),     QStringLiteral("w3"),
        QStringLiteral("proj"),   QStringLiteral("query_key_value"),
        QStringLiteral("dense_h_to_4h"), QStringLiteral("dense_4h_to_h"),
        QStringLiteral("qkv_proj"), QStringLiteral("o_proj")};
    return known.contains(part);
}

QString stripProj(const QString& part)
{
    if (part.size() > 5 && part.endsWith(QLatin1String("_proj")))
        return part.left(part.size() - 5);
    return part;
}

QString commonPrefix(const QStringList& names)
{
    // Whole dotted parts common to every name, never a whole name.
    if (names.size() < 2)
        return {};
    QStringList first = names.front().split(QLatin1Char('.'));
    qsizetype common = first.size() - 1;
    for (const QString& name : names) {
        const QStringList parts = name.split(QLatin1Char('.'));
        qsizetype n = 0;
        while (n < common && n < parts.size() - 1 && parts[n] == first[n])
            ++n;
        common = n;
    }
    if (common <= 0)
        return {};
    return first.mid(0, common).join(QLatin1Char('.')) + QLatin1Char('.');
}

} // namespace

std::optional<BlockLayer> parseBlockLayer(const QString& name)
{
    const QStringList parts = name.split(QLatin1Char('.'));
    for (qsizetype i = 0; i + 2 < parts.size(); ++i) {
        if (!isBlockWord(parts[i]))
            continue;
        bool ok = false;
        const int block = parts[i + 1].toInt(&ok);
        if (!ok || block < 0)
            continue;
        BlockLayer layer;
        layer.block = block;
        layer.tail = parts.mid(i + 2);
        const QString last = layer.tail.back();
        if (!isProjection(last) && !isProjection(stripProj(last)))
            return std::nullopt;
        layer.projection = stripProj(last);
        return layer;
    }
    return std::nullopt;
}

LayerGrid layerGrid(const QStringList& names)
{
    LayerGrid grid;
    std::vector<std::optional<BlockLayer>> parsed;
    parsed.reserve(static_cast<std::size_t>(names.size()));
    std::map<std::pair<int, QString>, int> perBlock;  // (block, projection) -> count
    for (const QString& name : names) {
        parsed.push_back(parseBlockLayer(name));
        if (parsed.back())
            ++perBlock[{parsed.back()->block, parsed.back()->projection}];
    }
    // A projection shared within a block anywhere: those layers keep their whole tail.
    std::set<QString> ambiguous;
    for (const auto& [key, count] : perBlock)
        if (count > 1)
            ambiguous.insert(key.second);
    std::set<int> blocks;
    std::vector<QString> keys(parsed.size());
    for (std::size_t i = 0; i < parsed.size(); ++i) {
        if (!parsed[i])
            continue;
        keys[i] = ambiguous.count(parsed[i]->projection) ? parsed[i]->tail.join(QLatin1Char('.'))
                                                         : parsed[i]->projection;
        blocks.insert(parsed[i]->block);
        if (!grid.columns.contains(keys[i]))
            grid.columns << keys[i];
    }
    grid.blocks.assign(blocks.begin(), blocks.end());
    grid.cell.assign(grid.blocks.size(),
                     std::vector<int>(static_cast<std::size_t>(grid.columns.size()), -1));
    for (std::size_t i = 0; i < parsed.size(); ++i) {
        if (!parsed[i]) {
            grid.outside.push_back(static_cast<int>(i));
            continue;
        }
        const auto row = static_cast<std::size_t>(
            std::lower_bound(grid.blocks.begin(), grid.blocks.end(), parsed[i]->block) -
            grid.blocks.begin());
        const auto col = static_cast<std::size_t>(grid.columns.indexOf(keys[i]));
        int& slot = grid.cell[row][col];
        if (slot >= 0)
            grid.outside.push_back(static_cast<int>(i));
        else
            slot = static_cast<int>(i);
    }
    return grid;
}

QStringList shortLayerLabels(const QStringList& names)
{
    const LayerGrid grid = layerGrid(names);
    QStringList labels(names.size());
    std::vector<bool> inGrid(static_cast<std::size_t>(names.size()), false);
    if (grid.valid()) {
        for (std::size_t r = 0; r < grid.blocks.size(); ++r)
            for (qsizetype c = 0; c < grid.columns.size(); ++c)
                if (const int i = grid.cell[r][static_cast<std::size_t>(c)]; i >= 0) {
                    labels[i] = QStringLiteral("%1.%2").arg(grid.blocks[r]).arg(grid.columns[c]);
                    inGrid[static_cast<std::size_t>(i)] = true;
                }
    }
    QStringList rest;
    for (qsizetype i = 0; i < names.size(); ++i)
        if (!inGrid[static_cast<std::size_t>(i)])
            rest << names[i];
    const QString prefix = commonPrefix(rest);
    for (qsizetype i = 0; i < names.size(); ++i)
        if (!inGrid[static_cast<std::size_t>(i)])
            labels[i] = names[i].mid(prefix.size());
    // Distinct: a label seen twice (or empty) is its full name.
    QMap<QString, int> seen;
    for (const QString& label : labels)
        ++seen[label];
    for (qsizetype i = 0; i < names.size(); ++i)
        if (labels[i].isEmpty() || seen.value(labels[i]) > 1)
            labels[i] = names[i];
    return labels;
}

double outlierRatio(const std::vector<double>& values)
{
    std::vector<double> positive;
    for (const double v : values)
        if (v > 0)
            positive.push_back(v);
    if (positive.empty())
        return 0.0;
    std::sort(positive.begin(), positive.end());
    const std::size_t n = positive.size();
    const double median = n % 2 ? positive[n / 2] : 0.5 * (positive[n / 2 - 1] + positive[n / 2]);
    return median > 0 ? positive.back() / median : 0.0;
}

bool hasOutlier(const std::vector<double>& values, double factor)
{
    return values.size() >= 3 && outlierRatio(values) > factor;
}

} // namespace bitlens::widgets
