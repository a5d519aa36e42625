#pragma once
// Layer names as the per-layer views show them: a transformer name parsed into block index and
// projection ("model.layers.17.self_attn.q_proj" -> block 17, "q"), the block x projection grid
// of a model, and short unique bar labels ("17.q"; otherwise the common dotted prefix stripped).
// Pure functions on strings: no widget, no report.

#include <QString>
#include <QStringList>

#include <optional>
#include <vector>

namespace bitlens::widgets {

/// A layer name split at its block index: `layers.N.<tail>`.
struct BlockLayer {
    int block = -1;      ///< N
    QStringList tail;    ///< the dotted parts after N ("self_attn", "q_proj")
    QString projection;  ///< the last part without "_proj" ("q", "down", "query", "fc1")
};

/// Parses a transformer-shaped name: a part "layers", "layer", "h", "blocks" or "block", then a
/// block index, then at least one part of which the last is a known projection (q, k, v, o,
/// qkv, gate, up, down, query, key, value, dense, fc1, fc2, c_attn, c_proj, c_fc, out, wi, wo,
/// w1..w3, ...; a trailing "_proj" dropped). nullopt for anything else ("lm_head", "fc1").
std::optional<BlockLayer> parseBlockLayer(const QString& name);

/// Layers laid out as rows = blocks and columns = projections.
struct LayerGrid {
    std::vector<int> blocks;           ///< row i shows block blocks[i] (ascending)
    QStringList columns;               ///< column keys in first-seen graph order ("q", ... "down")
    std::vector<std::vector<int>> cell;///< [row][column]: index into the input names, or -1
    std::vector<int> outside;          ///< names not in the grid (embeddings, lm_head), in order
    /// True when the grid is worth drawing: at least 2 blocks and 2 columns.
    bool valid() const { return blocks.size() >= 2 && columns.size() >= 2; }
};

/// The grid of `names` (graph order). A column key is the projection ("q"); where two layers of
/// one block share a projection ("attention.output.dense", "output.dense") they keep their whole
/// tail as key. A name whose (block, column) is already taken goes to `outside`.
LayerGrid layerGrid(const QStringList& names);

/// Short labels for bars, one per name, all distinct: "17.q" for a grid layer (grid column key
/// after the block), otherwise the dotted prefix common to the other names dropped
/// ("features.3" ... -> "3"); a label that would repeat is the full name.
QStringList shortLayerLabels(const QStringList& names);

/// True when the largest value is more than `factor` times the median of the positive values:
/// a linear axis would flatten every other bar.
bool hasOutlier(const std::vector<double>& values, double factor = 10.0);
/// Largest / median of the positive values (0 when there are none).
double outlierRatio(const std::vector<double>& values);

} // namespace bitlens::widgets
