#include "side_by_side_view.h"

#include "chart_json.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QHeaderView>
#include <QLabel>
#include <QLegend>
#include <QSplitter>
#include <QTableView>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace bitlens::widgets {

namespace rj = reportjson;

namespace {

/// Reads an SQNR member: a number, or null meaning exact (infinite). False when unusable.
bool readSqnr(const nlohmann::json& layer, std::string_view key, std::optional<double>& value,
              bool& exact)
{
    const nlohmann::json* v = rj::member(layer, key);
    if (!v)
        return false;
    if (v->is_null()) {
        exact = true;
        return true;
    }
    value = rj::asNumber(*v);
    return value.has_value();
}

QString dbText(const std::optional<double>& db, bool exact)
{
    if (exact)
        return QObject::tr("exact");
    return db ? QString::number(*db, 'f', 1) : QStringLiteral("–");
}

} // namespace

std::vector<LayerPair> pairLayers(const nlohmann::json& a, const nlohmann::json& b)
{
    std::vector<LayerPair> pairs;
    const auto find = [&pairs](const QString& name) -> LayerPair& {
        for (LayerPair& pair : pairs)
            if (pair.layer == name)
                return pair;
        pairs.push_back(LayerPair{name, {}, {}, {}, {}, false, false, false, false, {}, {}});
        return pairs.back();
    };
    for (const bool isA : {true, false}) {
        const nlohmann::json* layers = rj::array(isA ? a : b, "layers");
        if (!layers)
            continue;
        for (const nlohmann::json& layer : *layers) {
            const QString name = rj::text(layer, "name");
            if (name.isEmpty())
                continue;
            std::optional<double> local;
            std::optional<double> accum;
            bool exactLocal = false;
            bool exactAccum = false;
            if (!readSqnr(layer, "sqnr_db", local, exactLocal) ||
                !readSqnr(layer, "sqnr_db_accumulated", accum, exactAccum))
                continue;
            LayerPair& pair = find(name);
            (isA ? pair.localA : pair.localB) = local;
            (isA ? pair.accumA : pair.accumB) = accum;
            (isA ? pair.exactLocalA : pair.exactLocalB) = exactLocal;
            (isA ? pair.exactAccumA : pair.exactAccumB) = exactAccum;
            (isA ? pair.bytesA : pair.bytesB) = rj::number(layer, "bytes_quantized");
        }
    }
    return pairs;
}

SideBySideChart::SideBySideChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("SQNR per layer, run A vs run B"));
    showMessage(tr("No data: select two runs in History and press Side by side"));
}

void SideBySideChart::setRuns(const nlohmann::json& a, const QString& labelA,
                              const nlohmann::json& b, const QString& labelB)
{
    m_series = nullptr;
    m_names.clear();
    try {
        m_pairs = pairLayers(a, b);
    } catch (const std::exception&) {
        m_pairs.clear();
    }
    if (m_pairs.empty()) {
        setChartTitle(tr("SQNR per layer, run A vs run B"));
        showMessage(a.is_null() && b.is_null()
                        ? tr("No data: select two runs in History and press Side by side")
                        : tr("No data: the runs have no layers with SQNR"));
        return;
    }
    // The heading above names the runs; the title stays short enough for the chart's width.
    setChartTitle(tr("SQNR per layer, A vs B (higher is better)"));
    clearChart();
    markHasData();

    double maxFinite = 40.0;
    double minFinite = 0.0;
    for (const LayerPair& pair : m_pairs)
        for (const auto& v : {pair.localA, pair.accumA, pair.localB, pair.accumB})
            if (v) {
                maxFinite = std::max(maxFinite, *v);
                minFinite = std::min(minFinite, *v);
            }
    // Exact (infinite) bars reach past every finite bar, then the axis ends.
    const double top = std::ceil(maxFinite * 1.12 / 10.0) * 10.0;

    // A in blues, B in oranges: light = local, dark = accumulated (Okabe-Ito).
    struct SetSpec {
        QString name;
        QColor color;
    };
    const std::array<SetSpec, 4> specs = {SetSpec{tr("A local"), chartColor(5)},
                                          SetSpec{tr("A accumulated"), chartColor(0)},
                                          SetSpec{tr("B local"), chartColor(1)},
                                          SetSpec{tr("B accumulated"), chartColor(3)}};
    m_series = new QBarSeries;
    for (int s = 0; s < 4; ++s) {
        const SetSpec& spec = specs[static_cast<std::size_t>(s)];
        auto* set = new QBarSet(spec.name);
        set->setColor(spec.color);
        set->setBorderColor(spec.color);
        for (const LayerPair& pair : m_pairs) {
            const std::optional<double>& value =
                s == 0 ? pair.localA : s == 1 ? pair.accumA : s == 2 ? pair.localB : pair.accumB;
            const bool exact = s == 0   ? pair.exactLocalA
                               : s == 1 ? pair.exactAccumA
                               : s == 2 ? pair.exactLocalB
                                        : pair.exactAccumB;
            *set << (exact ? top : value.value_or(0.0));
        }
        m_series->append(set);
        connect(set, &QBarSet::hovered, this, [this, s, labelA, labelB](bool status, int index) {
            if (!status || index < 0 || index >= static_cast<int>(m_pairs.size())) {
                hideToolTip();
                return;
            }
            const LayerPair& p = m_pairs[static_cast<std::size_t>(index)];
            showToolTip(tr("<b>%1</b><br>A (%2): local %3, accumulated %4 dB<br>"
                           "B (%5): local %6, accumulated %7 dB<br>(bar: %8)")
                            .arg(p.layer.toHtmlEscaped(), labelA.toHtmlEscaped(),
                                 dbText(p.localA, p.exactLocalA), dbText(p.accumA, p.exactAccumA),
                                 labelB.toHtmlEscaped(), dbText(p.localB, p.exactLocalB),
                                 dbText(p.accumB, p.exactAccumB))
                            .arg(s == 0   ? tr("A local")
                                 : s == 1 ? tr("A accumulated")
                                 : s == 2 ? tr("B local")
                                          : tr("B accumulated")));
        });
    }
    m_series->setBarWidth(0.8);
    chart()->addSeries(m_series);
    for (const LayerPair& pair : m_pairs)
        m_names << pair.layer;
    auto* axisX = new QBarCategoryAxis;
    axisX->append(m_names);
    styleAxis(axisX, tr("Layer (graph order)"));
    chart()->addAxis(axisX, Qt::AlignBottom);
    m_series->attachAxis(axisX);
    QValueAxis* axisY = addValueAxis(tr("SQNR (dB)"), Qt::AlignLeft);
    const double bottom = std::floor(minFinite / 10.0) * 10.0;
    setRoundTicks(axisY, bottom, top, static_cast<int>((top - bottom) / 10.0));
    m_series->attachAxis(axisY);
    chart()->legend()->setAlignment(Qt::AlignTop);
}

SideBySideModel::SideBySideModel(QObject* parent) : QAbstractTableModel(parent) {}

void SideBySideModel::setRuns(const nlohmann::json& a, const nlohmann::json& b)
{
    beginResetModel();
    try {
        m_pairs = pairLayers(a, b);
    } catch (const std::exception&) {
        m_pairs.clear();
    }
    endResetModel();
}

int SideBySideModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_pairs.size());
}

int SideBySideModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant SideBySideModel::rawValue(const LayerPair& pair, int column) const
{
    constexpr double kInf = std::numeric_limits<double>::infinity();
    const auto sqnr = [](const std::optional<double>& v, bool exact) {
        return exact ? QVariant(kInf) : v ? QVariant(*v) : QVariant();
    };
    switch (column) {
    case Layer: return pair.layer;
    case SqnrA: return sqnr(pair.accumA, pair.exactAccumA);
    case SqnrB: return sqnr(pair.accumB, pair.exactAccumB);
    case Difference:
        // Exact on both sides is no difference; one exact side has no finite difference.
        if (pair.exactAccumA && pair.exactAccumB)
            return 0.0;
        if (pair.accumA && pair.accumB)
            return *pair.accumB - *pair.accumA;
        return {};
    case BytesA: return pair.bytesA ? QVariant(*pair.bytesA) : QVariant();
    case BytesB: return pair.bytesB ? QVariant(*pair.bytesB) : QVariant();
    default: return {};
    }
}

QVariant SideBySideModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const LayerPair& pair = m_pairs[static_cast<std::size_t>(index.row())];
    const int column = index.column();
    const QVariant raw = rawValue(pair, column);
    if (role == RawRole)
        return raw;
    if (role == Qt::TextAlignmentRole)
        return int((column == Layer ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter);
    if (role != Qt::DisplayRole)
        return {};
    if (column == Layer)
        return pair.layer;
    if (!raw.isValid())
        return QStringLiteral("–");
    const double value = raw.toDouble();
    switch (column) {
    case SqnrA:
    case SqnrB: return std::isinf(value) ? tr("exact") : QString::number(value, 'f', 1);
    case Difference:
        return (value >= 0 ? QStringLiteral("+") : QString()) + QString::number(value, 'f', 1);
    case BytesA:
    case BytesB: return rj::bytesLabel(value);
    default: return {};
    }
}

QVariant SideBySideModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return QAbstractTableModel::headerData(section, orientation, role);
    if (role == Qt::ToolTipRole && (section == SqnrA || section == SqnrB || section == Difference))
        return tr("Accumulated SQNR (all layers up to here quantized), dB");
    if (role == Qt::ToolTipRole && (section == BytesA || section == BytesB))
        return tr("The layer's quantized weight bytes");
    if (role != Qt::DisplayRole)
        return {};
    switch (section) {
    case Layer: return tr("Layer");
    case SqnrA: return tr("A (dB)");
    case SqnrB: return tr("B (dB)");
    case Difference: return tr("B − A");
    case BytesA: return tr("Bytes A");
    case BytesB: return tr("Bytes B");
    default: return {};
    }
}

SideBySideView::SideBySideView(QWidget* parent)
    : QWidget(parent), m_heading(new QLabel), m_chart(new SideBySideChart),
      m_model(new SideBySideModel(this)), m_table(new QTableView)
{
    setObjectName(QStringLiteral("sideBySideView"));
    m_heading->setObjectName(QStringLiteral("sideBySideHeading"));
    m_heading->setWordWrap(true);
    m_chart->setObjectName(QStringLiteral("sideBySideChart"));
    m_table->setObjectName(QStringLiteral("sideBySideTable"));
    m_table->setModel(m_model);
    m_table->verticalHeader()->hide();
    m_table->setAlternatingRowColors(true);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    // A model reset forgets per-section modes: every column fits its contents, the last one
    // takes the width left over.
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setStretchLastSection(true);
    auto* splitter = new QSplitter(Qt::Horizontal);
    splitter->addWidget(m_chart);
    splitter->addWidget(m_table);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    splitter->setSizes({525, 385});
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 4, 0, 0);
    layout->addWidget(m_heading);
    layout->addWidget(splitter, 1);
    clear();
}

void SideBySideView::setRuns(const nlohmann::json& a, const QString& labelA,
                             const nlohmann::json& b, const QString& labelB)
{
    m_heading->setText(tr("A = %1 · B = %2 · the table shows accumulated SQNR; B − A above "
                          "zero: B is closer to float")
                           .arg(labelA, labelB));
    m_chart->setRuns(a, labelA, b, labelB);
    m_model->setRuns(a, b);
}

void SideBySideView::clear()
{
    m_heading->setText(tr("Select two runs in History (Ctrl+click) and press Side by side."));
    m_chart->setRuns(nlohmann::json(), QString(), nlohmann::json(), QString());
    m_model->setRuns(nlohmann::json(), nlohmann::json());
}

QString SideBySideView::headingText() const { return m_heading->text(); }

} // namespace bitlens::widgets
