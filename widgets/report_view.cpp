#include "report_view.h"

#include "chart_latency.h"

#include "chart_histogram.h"
#include "chart_json.h"
#include "chart_memory.h"
#include "chart_pareto.h"
#include "chart_sensitivity.h"
#include "chart_sqnr.h"
#include "chart_throughput.h"
#include "comparison_table_model.h"
#include "layer_heatmap.h"
#include "layer_table_model.h"
#include "side_by_side_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QItemSelectionModel>
#include <QHeaderView>
#include <QLabel>
#include <QProxyStyle>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabBar>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

namespace bitlens::widgets {

namespace {

/// The result tabs' bar with half the style's padding beside each label: the thirteen tabs
/// (nine result views and Teach, Hardware, Plan, Training, Export) fit the default 1280x800
/// window whole, without scroll arrows that hid Training and Export.
class CompactTabStyle : public QProxyStyle {
public:
    using QProxyStyle::QProxyStyle;
    int pixelMetric(PixelMetric metric, const QStyleOption* option,
                    const QWidget* widget) const override
    {
        const int value = QProxyStyle::pixelMetric(metric, option, widget);
        return metric == PM_TabBarTabHSpace ? value / 2 : value;
    }
};

QString metricName(const std::string& name)
{
    if (name == "top1")
        return QStringLiteral("top-1");
    if (name == "embedding_cosine")
        return QStringLiteral("embedding cosine");
    if (name == "output_agreement")
        return QStringLiteral("output agreement");
    return QString::fromStdString(name);
}

/// The compare table's proxy: sorts by raw values, gives the columns short headers (the full
/// header and the direction are the tooltip), so every column fits next to the Pareto chart at
/// 1280x800, and shows a language model's KL divergence columns only where there are some.
class CompareProxy : public QSortFilterProxyModel {
public:
    using QSortFilterProxyModel::QSortFilterProxyModel;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override
    {
        if (orientation != Qt::Horizontal ||
            (role != Qt::DisplayRole && role != Qt::ToolTipRole))
            return QSortFilterProxyModel::headerData(section, orientation, role);
        const int column = sourceColumn(section);
        const QVariant full = sourceModel()->headerData(column, orientation, Qt::DisplayRole);
        if (role == Qt::ToolTipRole) {
            const QVariant tip = sourceModel()->headerData(column, orientation, role);
            return tip.isValid() ? tip : full;
        }
        const auto* model = qobject_cast<const ComparisonTableModel*>(sourceModel());
        if (!model)
            return full;
        if (const auto figure = model->columnFigure(column))
            return QString::fromStdString(figure->shortTitle);
        switch (column) {
        case ComparisonTableModel::Change:
            switch (changeUnitOf(model->metricName())) {
            case ChangeUnit::Points: return tr("Δ pts");
            case ChangeUnit::Percent: return tr("Δ %");
            case ChangeUnit::Same: return tr("Δ");
            }
            return tr("Δ");
        case ComparisonTableModel::Size: return tr("Size (ratio)");
        case ComparisonTableModel::MinSqnr: return tr("Min dB");
        case ComparisonTableModel::Throughput: return tr("Samples/s");
        default: return full;
        }
    }

protected:
    bool filterAcceptsColumn(int column, const QModelIndex& parent) const override
    {
        const auto* model = qobject_cast<const ComparisonTableModel*>(sourceModel());
        if (model && !model->hasDivergence() &&
            (column == ComparisonTableModel::MeanKld || column == ComparisonTableModel::KldP99 ||
             column == ComparisonTableModel::SameTop))
            return false;
        return QSortFilterProxyModel::filterAcceptsColumn(column, parent);
    }

private:
    /// The source column of proxy column `section` (mapToSource needs a row to map through).
    int sourceColumn(int section) const
    {
        int shown = -1;
        for (int column = 0; column < sourceModel()->columnCount(); ++column)
            if (filterAcceptsColumn(column, {}) && ++shown == section)
                return column;
        return section;
    }
};

} // namespace

QString reportSummary(const nlohmann::json& report)
{
    if (!report.is_object() || !report.contains("layers"))
        return {};
    QStringList parts;
    const nlohmann::json scheme = report.value("scheme", nlohmann::json::object());
    QString spec = scheme.is_object() ? QString::fromStdString(scheme.value("spec", std::string()))
                                      : QString();
    if (spec.isEmpty())
        spec = QObject::tr("(scheme)");
    const nlohmann::json metric = report.value("metric", nlohmann::json());
    if (metric.is_object() && metric.value("float", nlohmann::json()).is_number() &&
        metric.value("quantized", nlohmann::json()).is_number()) {
        const double f = metric["float"].get<double>();
        const double q = metric["quantized"].get<double>();
        const std::string raw = metric.value("name", std::string("metric"));
        // Perplexity counts scored tokens and changes by a ratio; the others are fractions.
        const bool perplexity = raw == "perplexity";
        QString name = metricName(raw);
        if (const nlohmann::json samples = metric.value("samples", nlohmann::json());
            samples.is_number_integer())
            name = (perplexity ? QObject::tr("%1 on %2 tokens") : QObject::tr("%1 on %2 samples"))
                       .arg(name, formatCount(samples.get<std::int64_t>()));
        if (perplexity)
            parts << QObject::tr("%1 %2 -> %3 (%4 %)")
                         .arg(name)
                         .arg(f, 0, 'f', 3)
                         .arg(q, 0, 'f', 3)
                         .arg(QString::asprintf("%+.2f", f > 0 ? 100.0 * (q / f - 1.0) : 0.0));
        else if (raw == "top1" || raw == "output_agreement")
            // Fractions of samples read as percentages; their change in percentage points.
            parts << QObject::tr("%1 %2 % -> %3 % (%4 points)")
                         .arg(name)
                         .arg(100.0 * f, 0, 'f', 2)
                         .arg(100.0 * q, 0, 'f', 2)
                         .arg(QString::asprintf("%+.2f", 100.0 * (q - f)));
        else
            // A cosine (or another score in [0, 1] that is no share of samples): its change in
            // the same unit.
            parts << QObject::tr("%1 %2 -> %3 (%4)")
                         .arg(name)
                         .arg(f, 0, 'f', 4)
                         .arg(q, 0, 'f', 4)
                         .arg(QString::asprintf("%+.4f", q - f));
        if (metric.value("float_reused", false))
            parts << QObject::tr("float metric reused from an earlier run on the same data");
    }
    // Language models: how far the quantized next-token distributions moved (llama-perplexity's
    // KL divergence statistics).
    if (const nlohmann::json kl = report.value("kl_divergence", nlohmann::json()); kl.is_object()) {
        const nlohmann::json kld = kl.value("kld", nlohmann::json());
        const nlohmann::json top = kl.value("same_top", nlohmann::json());
        if (kld.is_object() && kld.value("mean", nlohmann::json()).is_number() &&
            kld.value("p99", nlohmann::json()).is_number() && top.is_object() &&
            top.value("fraction", nlohmann::json()).is_number())
            parts << QObject::tr("KL divergence %1 (99th percentile %2), same top token %3 %")
                         .arg(kld["mean"].get<double>(), 0, 'f', 5)
                         .arg(kld["p99"].get<double>(), 0, 'f', 4)
                         .arg(100.0 * top["fraction"].get<double>(), 0, 'f', 1);
    }
    const nlohmann::json size = report.value("size_bytes", nlohmann::json());
    if (size.is_object() && size.value("float", nlohmann::json()).is_number() &&
        size.value("quantized", nlohmann::json()).is_number()) {
        const auto f = size["float"].get<std::int64_t>();
        const auto q = size["quantized"].get<std::int64_t>();
        parts << QObject::tr("size %1 -> %2 (%3)")
                     .arg(bytesText(f), bytesText(q))
                     .arg(f > 0 ? static_cast<double>(q) / static_cast<double>(f) : 0.0, 0, 'f',
                          3);
    }
    const KernelCount kernels = kernelCount(report);
    const int layers = kernels.layers;
    parts << QObject::tr("%1 of %2 layers on real kernels").arg(kernels.real).arg(layers);
    const nlohmann::json reused = report.value("reused_layers", nlohmann::json());
    if (reused.is_array() && !reused.empty())
        parts << QObject::tr("%1 of %2 layers unchanged since the last run, not re-quantized")
                     .arg(reused.size())
                     .arg(layers);
    return spec + QStringLiteral(": ") + parts.join(QStringLiteral(", "));
}

ReportView::ReportView(QWidget* parent)
    : QWidget(parent), m_summary(new QLabel), m_tabs(new QTabWidget)
{
    setObjectName(QStringLiteral("reportView"));
    m_summary->setObjectName(QStringLiteral("summaryLabel"));
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_summary->setWordWrap(true);
    QFont bold = m_summary->font();
    bold.setBold(true);
    m_summary->setFont(bold);
    m_tabs->setObjectName(QStringLiteral("resultTabs"));
    m_tabs->setDocumentMode(true);
    auto* tabStyle = new CompactTabStyle;
    tabStyle->setParent(this);
    m_tabs->tabBar()->setStyle(tabStyle);

    m_tabs->addTab(createLayersTab(), tr("Layers"));
    m_tabs->addTab(createLayerMapTab(), tr("Layer map"));
    m_memory = new MemoryChart;
    m_memory->setObjectName(QStringLiteral("memoryChart"));
    m_tabs->addTab(m_memory, tr("Memory"));
    m_throughput = new ThroughputChart;
    m_throughput->setObjectName(QStringLiteral("throughputChart"));
    m_latency = new LayerLatencyChart;
    m_latency->setObjectName(QStringLiteral("latencyChart"));
    auto* speed = new QSplitter(Qt::Horizontal);
    speed->addWidget(m_throughput);
    speed->addWidget(m_latency);
    m_tabs->addTab(speed, tr("Throughput"));
    m_tabs->addTab(createCompareTab(), tr("Compare"));
    m_tabs->addTab(createSensitivityTab(), tr("Sensitivity"));
    m_tabs->addTab(createHistoryTab(), tr("History"));
    m_sideBySide = new SideBySideView;
    m_tabs->addTab(m_sideBySide, tr("Side by side"));

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 4, 0, 0);
    layout->addWidget(m_summary);
    layout->addWidget(m_tabs, 1);
    clear();
}

QWidget* ReportView::createLayersTab()
{
    auto* tab = new QSplitter(Qt::Horizontal);
    m_sqnr = new SqnrChart;
    m_sqnr->setObjectName(QStringLiteral("sqnrChart"));
    connect(m_sqnr, &SqnrChart::layerClicked, this, [this](const QString& layer) {
        selectLayer(layer);
        Q_EMIT layerSelected(layer);
    });
    auto* right = new QWidget;
    auto* rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    auto* modeRow = new QHBoxLayout;
    modeRow->addWidget(new QLabel(tr("Histogram of the selected layer:")));
    m_histogramMode = new QComboBox;
    m_histogramMode->setObjectName(QStringLiteral("histogramMode"));
    m_histogramMode->addItems({tr("Error"), tr("Weights"), tr("Activations")});
    m_histogramMode->setToolTip(tr("Error: quantized minus float output (accumulated). "
                                   "Weights: float weights with the quantization range. "
                                   "Activations: the layer's input with the clip points."));
    modeRow->addWidget(m_histogramMode);
    modeRow->addStretch(1);
    rightLayout->addLayout(modeRow);
    m_histogram = new HistogramChart;
    m_histogram->setObjectName(QStringLiteral("histogramChart"));
    rightLayout->addWidget(m_histogram, 1);
    connect(m_histogramMode, &QComboBox::currentIndexChanged, this, &ReportView::updateHistogram);
    tab->addWidget(m_sqnr);
    tab->addWidget(right);
    tab->setStretchFactor(0, 3);
    tab->setStretchFactor(1, 2);
    return tab;
}

QWidget* ReportView::createLayerMapTab()
{
    auto* tab = new QWidget;
    auto* layout = new QVBoxLayout(tab);
    layout->setContentsMargins(0, 4, 0, 0);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("Figure per layer:")));
    m_heatmapMetric = new QComboBox;
    m_heatmapMetric->setObjectName(QStringLiteral("heatmapMetric"));
    for (const LayerHeatmap::Metric metric : LayerHeatmap::allMetrics())
        m_heatmapMetric->addItem(LayerHeatmap::metricName(metric), static_cast<int>(metric));
    row->addWidget(m_heatmapMetric);
    row->addStretch(1);
    layout->addLayout(row);
    m_heatmap = new LayerHeatmap;
    auto* scroll = new QScrollArea;
    scroll->setObjectName(QStringLiteral("layerMapScroll"));
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setWidget(m_heatmap);
    layout->addWidget(scroll, 1);
    connect(m_heatmapMetric, &QComboBox::currentIndexChanged, this, [this] {
        m_heatmap->setMetric(
            static_cast<LayerHeatmap::Metric>(m_heatmapMetric->currentData().toInt()));
    });
    connect(m_heatmap, &LayerHeatmap::layerClicked, this, [this](const QString& layer) {
        selectLayer(layer);
        Q_EMIT layerSelected(layer);
    });
    return tab;
}

QWidget* ReportView::createCompareTab()
{
    auto* tab = new QSplitter(Qt::Horizontal);
    auto* left = new QWidget;
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    m_compareStatus = new QLabel;
    m_compareStatus->setObjectName(QStringLiteral("compareStatus"));
    m_compareStatus->setWordWrap(true);
    leftLayout->addWidget(m_compareStatus);
    m_compareTable = new QTableView;
    m_compareTable->setObjectName(QStringLiteral("compareTable"));
    m_compareTable->setSortingEnabled(true);
    m_compareTable->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_compareTable->setAlternatingRowColors(true);
    m_compareTable->horizontalHeader()->setStretchLastSection(true);
    m_compareTable->verticalHeader()->hide();
    m_compareTable->setWordWrap(false);
    m_compareModel = new ComparisonTableModel(this);
    auto* proxy = new CompareProxy(this);
    proxy->setSourceModel(m_compareModel);
    proxy->setSortRole(ComparisonTableModel::SortRole);
    m_compareTable->setModel(proxy);
    // Every column as wide as its contents; the last (kernels) takes what is left (stretch last
    // section, set above: per-section modes would not survive a model reset).
    m_compareTable->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    leftLayout->addWidget(m_compareTable, 1);
    tab->addWidget(left);
    // The figure the chart weighs: a language model's runs offer perplexity and the KL
    // divergence figures (mean KLD by default); a classifier's only its metric (row hidden).
    auto* right = new QWidget;
    auto* rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    m_paretoFigureRow = new QWidget;
    auto* figureRow = new QHBoxLayout(m_paretoFigureRow);
    figureRow->setContentsMargins(0, 0, 0, 0);
    figureRow->addWidget(new QLabel(tr("Weigh size against:")));
    m_paretoFigure = new QComboBox;
    m_paretoFigure->setObjectName(QStringLiteral("paretoFigure"));
    m_paretoFigure->setToolTip(tr("The figure the Pareto chart weighs against model size"));
    figureRow->addWidget(m_paretoFigure);
    figureRow->addStretch(1);
    m_paretoFigureRow->setVisible(false);
    rightLayout->addWidget(m_paretoFigureRow);
    m_pareto = new ParetoChart;
    m_pareto->setObjectName(QStringLiteral("paretoChart"));
    rightLayout->addWidget(m_pareto, 1);
    tab->addWidget(right);
    connect(m_paretoFigure, &QComboBox::activated, this, [this](int index) {
        m_pareto->setFigure(m_paretoFigure->itemData(index).toString());
    });
    tab->setStretchFactor(0, 3);
    tab->setStretchFactor(1, 2);
    tab->setSizes({600, 320});
    return tab;
}

bool ReportView::sensitivityByKld() const
{
    return m_sensitivityRank && m_sensitivityRank->currentIndex() == 1;
}

QWidget* ReportView::createSensitivityTab()
{
    auto* tab = new QWidget;
    auto* layout = new QVBoxLayout(tab);
    auto* row = new QHBoxLayout;
    auto* run = new QPushButton(tr("Run sensitivity"));
    run->setObjectName(QStringLiteral("runSensitivity"));
    run->setToolTip(tr("Quantize each layer alone with the current scheme and measure the task "
                       "metric: which layer costs the most accuracy?"));
    connect(run, &QPushButton::clicked, this, &ReportView::sensitivityRequested);
    row->addWidget(run);
    row->addWidget(new QLabel(tr("Rank by:")));
    m_sensitivityRank = new QComboBox;
    m_sensitivityRank->setObjectName(QStringLiteral("sensitivityRank"));
    m_sensitivityRank->addItem(tr("Task metric change"));
    m_sensitivityRank->addItem(tr("Output KL divergence (language models)"));
    m_sensitivityRank->setToolTip(
        tr("Language models: rank each layer by how far its quantization alone moves the "
           "next-token distributions from the float model's (mean KL divergence, as "
           "llama-perplexity reports it; one float and one quantized pass per layer)"));
    row->addWidget(m_sensitivityRank);
    row->addStretch(1);
    layout->addLayout(row);
    m_sensitivityChart = new SensitivityChart;
    m_sensitivityChart->setObjectName(QStringLiteral("sensitivityChart"));
    connect(m_sensitivityChart, &SensitivityChart::layerClicked, this, [this](const QString& layer) {
        selectLayer(layer);
        Q_EMIT layerSelected(layer);
    });
    layout->addWidget(m_sensitivityChart, 1);
    return tab;
}

QWidget* ReportView::createHistoryTab()
{
    auto* tab = new QWidget;
    auto* layout = new QVBoxLayout(tab);
    layout->setContentsMargins(0, 4, 0, 0);
    auto* row = new QHBoxLayout;
    auto* hint = new QLabel(tr("Every run on this model. Select a run to show it in the other "
                               "tabs; select two (Ctrl+click) to compare them."));
    hint->setWordWrap(true);
    row->addWidget(hint, 1);
    m_sideBySideButton = new QPushButton(tr("Side by side"));
    m_sideBySideButton->setObjectName(QStringLiteral("sideBySideButton"));
    m_sideBySideButton->setToolTip(tr("Show the two selected runs' SQNR per layer together"));
    m_sideBySideButton->setEnabled(false);
    row->addWidget(m_sideBySideButton);
    layout->addLayout(row);
    m_history = new HistoryModel(this);
    m_historyTable = new QTableView;
    m_historyTable->setObjectName(QStringLiteral("historyTable"));
    m_historyTable->setModel(m_history);
    m_historyTable->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_historyTable->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_historyTable->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_historyTable->setAlternatingRowColors(true);
    m_historyTable->setWordWrap(false);
    // Numbers fit their contents, the scheme takes the width left over; a model reset forgets
    // per-section modes, so they are set again after each.
    const auto fitColumns = [this] {
        QHeaderView* header = m_historyTable->horizontalHeader();
        header->setSectionResizeMode(QHeaderView::ResizeToContents);
        header->setSectionResizeMode(HistoryModel::Scheme, QHeaderView::Stretch);
    };
    fitColumns();
    connect(m_history, &QAbstractItemModel::modelReset, this, fitColumns);
    layout->addWidget(m_historyTable, 1);
    connect(m_historyTable->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            &ReportView::onHistorySelectionChanged);
    connect(m_sideBySideButton, &QPushButton::clicked, this, [this] {
        const QModelIndexList rows = m_historyTable->selectionModel()->selectedRows();
        if (rows.size() == 2)
            showSideBySide(std::min(rows[0].row(), rows[1].row()),
                           std::max(rows[0].row(), rows[1].row()));
    });
    return tab;
}

void ReportView::onHistorySelectionChanged()
{
    const QModelIndexList rows = m_historyTable->selectionModel()->selectedRows();
    m_sideBySideButton->setEnabled(rows.size() == 2);
    if (rows.size() == 1)
        Q_EMIT historyRunSelected(rows.front().row());
}

void ReportView::addRun(HistoryRun run)
{
    m_history->addRun(std::move(run));
    updatePareto();
}

void ReportView::addComparisonRuns(const nlohmann::json& comparison, const QString& modelPath)
{
    m_history->addComparison(comparison, modelPath);
    updatePareto();
}

bool ReportView::showSideBySide(int rowA, int rowB)
{
    const int rows = m_history->rowCount();
    if (rowA < 0 || rowB < 0 || rowA >= rows || rowB >= rows)
        return false;
    m_sideBySide->setRuns(m_history->run(rowA).report, m_history->runLabel(rowA),
                          m_history->run(rowB).report, m_history->runLabel(rowB));
    showTab(QStringLiteral("Side by side"));
    return true;
}

void ReportView::updatePareto()
{
    // The Pareto chart weighs every run on the open model; without a history (an opened compare
    // file) it shows the comparison on screen. A run repeated with the same result (static-int8
    // alone, then in "Compare all schemes") is one point.
    if (m_history->rowCount() == 0) {
        m_pareto->setComparison(m_comparison);
        updateParetoFigures();
        return;
    }
    nlohmann::json runs = nlohmann::json::array();
    std::vector<std::tuple<std::string, nlohmann::json, nlohmann::json>> seen;
    const nlohmann::json all = m_history->comparison();
    for (const nlohmann::json& run : all["runs"]) {
        // Where the float figure came from does not make it another run.
        nlohmann::json metric = run.value("metric", nlohmann::json());
        if (metric.is_object())
            metric.erase("float_reused");
        auto key = std::make_tuple(run.value("scheme", nlohmann::json()).dump(), std::move(metric),
                                   run.value("size_bytes", nlohmann::json()));
        if (std::find(seen.begin(), seen.end(), key) != seen.end())
            continue;
        seen.push_back(std::move(key));
        runs.push_back(run);
    }
    m_pareto->setComparison(nlohmann::json{{"runs", std::move(runs)}});
    updateParetoFigures();
}

void ReportView::updateParetoFigures()
{
    const QSignalBlocker block(m_paretoFigure);
    m_paretoFigure->clear();
    for (const QString& name : m_pareto->figures())
        m_paretoFigure->addItem(reportjson::metricTitle(name), name);
    m_paretoFigure->setCurrentIndex(m_paretoFigure->findData(m_pareto->figure()));
    m_paretoFigureRow->setVisible(m_paretoFigure->count() > 1);
}

void ReportView::setModelMetric(const QString& metricName)
{
    m_compareModel->setDefaultMetric(metricName);
    m_pareto->setModelMetric(metricName);
    updateParetoFigures();
}

void ReportView::setRunning(const QString& what)
{
    m_running = what;
    updateSummary();
}

void ReportView::updateSummary()
{
    const QString summary = reportSummary(m_report);
    if (!m_running.isEmpty() && m_partial)
        m_summary->setText(tr("Running %1… the layer errors are in; the task metric is being "
                              "evaluated: %2")
                               .arg(m_running, summary));
    else if (!m_running.isEmpty())
        m_summary->setText(summary.isEmpty()
                               ? tr("Running %1… the results appear here when it ends (progress "
                                    "and time left in the status bar).")
                                     .arg(m_running)
                               : tr("Running %1… On screen until it ends: %2")
                                     .arg(m_running, summary));
    else
        m_summary->setText(summary.isEmpty()
                               ? tr("No run yet: choose a scheme and press Run (Ctrl+R).")
                               : summary);
}

void ReportView::beginComparison(int total)
{
    m_compareTotal = total;
    m_comparing = true;
    setComparison(nlohmann::json{{"runs", nlohmann::json::array()}});
    m_compareStatus->setText(
        tr("Comparing %1 schemes: each row appears as its scheme finishes.").arg(total));
}

void ReportView::addComparisonRun(const nlohmann::json& run)
{
    if (!m_comparison.is_object() || !m_comparison["runs"].is_array())
        m_comparison = nlohmann::json{{"runs", nlohmann::json::array()}};
    m_comparison["runs"].push_back(run);
    setComparison(m_comparison);
    m_compareStatus->setText(tr("%1 of %2 schemes done; running the next…")
                                 .arg(m_comparison["runs"].size())
                                 .arg(m_compareTotal));
}

void ReportView::endComparison(bool complete, const QString& elapsed)
{
    const auto done = m_comparison.is_object() && m_comparison["runs"].is_array()
                          ? static_cast<int>(m_comparison["runs"].size())
                          : 0;
    m_comparing = false;
    const QString time = elapsed.isEmpty() ? QString() : tr(" (%1)").arg(elapsed);
    m_compareStatus->setText(complete ? tr("Done: %1 schemes compared%2.").arg(done).arg(time)
                                      : tr("Stopped after %1 of %2 schemes%3; the finished "
                                           "ones are kept.")
                                            .arg(done)
                                            .arg(m_compareTotal)
                                            .arg(time));
}

void ReportView::showPartialReport(const nlohmann::json& report)
{
    if (!m_partial)
        m_beforePartial = m_report;
    applyReport(report, true);
}

bool ReportView::dropPartialReport()
{
    if (!m_partial)
        return false;
    setReport(nlohmann::json(m_beforePartial));
    return true;
}

void ReportView::setReport(const nlohmann::json& report) { applyReport(report, false); }

void ReportView::applyReport(const nlohmann::json& report, bool partial)
{
    m_partial = partial;
    if (!partial)
        m_beforePartial = nullptr;
    m_report = report;
    updateSummary();
    m_sqnr->setReport(report);
    m_histogram->setReport(report);
    m_memory->setReport(report);
    m_heatmap->setReport(report);
    m_throughput->setReport(report);
    m_latency->setReport(report);
    bool found = false;
    if (report.is_object() && report.contains("layers"))
        for (const nlohmann::json& layer : report["layers"])
            found = found || (layer.is_object() &&
                              layer.value("name", std::string()) == m_selected.toStdString());
    if (!found && report.is_object() && report.contains("layers") && !report["layers"].empty())
        m_selected = QString::fromStdString(report["layers"].front().value("name", std::string()));
    m_sqnr->setSelectedLayer(m_selected);
    m_heatmap->setSelectedLayer(m_selected);
    updateHistogram();
    Q_EMIT reportChanged();
}

void ReportView::setComparison(const nlohmann::json& comparison)
{
    m_comparison = comparison;
    m_compareModel->setComparison(comparison);
    updatePareto();
    // A compare file opened (not a comparison running here): say where the rows come from.
    if (!m_comparing && comparison.is_object() && comparison.contains("runs") &&
        comparison["runs"].is_array() && !comparison["runs"].empty())
        m_compareStatus->setText(tr("%1 schemes from a compare report; “Compare all schemes” "
                                    "runs them on the open model.")
                                     .arg(comparison["runs"].size()));
}

void ReportView::setSensitivity(const nlohmann::json& sensitivity)
{
    m_sensitivity = sensitivity;
    m_sensitivityChart->setSensitivity(sensitivity);
}

void ReportView::clear()
{
    m_selected.clear();
    m_comparison = nullptr;
    m_sensitivity = nullptr;
    m_running.clear();
    m_compareTotal = 0;
    m_comparing = false;
    m_compareStatus->setText(
        tr("Compare every scheme on this model: press “Compare all schemes” in the Scheme "
           "panel, or open a compare report (File > Open Report)."));
    m_compareModel->setComparison(nlohmann::json());
    m_history->clear();
    m_sideBySide->clear();
    updatePareto();
    m_sensitivityChart->setSensitivity(nlohmann::json());
    setReport(nullptr);
}

QString ReportView::summaryText() const { return m_summary->text(); }

QString ReportView::histogramLayer() const { return m_histogramLayer; }

void ReportView::selectLayer(const QString& layer)
{
    if (layer == m_selected)
        return;
    m_selected = layer;
    m_sqnr->setSelectedLayer(layer);
    m_heatmap->setSelectedLayer(layer);
    updateHistogram();
}

bool ReportView::showTab(const QString& name)
{
    for (int i = 0; i < m_tabs->count(); ++i) {
        if (m_tabs->tabText(i).remove(QLatin1Char('&')).compare(name, Qt::CaseInsensitive) == 0) {
            m_tabs->setCurrentIndex(i);
            return true;
        }
    }
    return false;
}

void ReportView::updateHistogram()
{
    // The histogram shows a layer of the report; layers the report does not list show nothing.
    m_histogramLayer.clear();
    if (!m_report.is_object() || !m_report.contains("layers"))
        return;
    for (const nlohmann::json& layer : m_report["layers"])
        if (layer.is_object() && layer.value("name", std::string()) == m_selected.toStdString())
            m_histogramLayer = m_selected;
    const int mode = m_histogramMode->currentIndex();
    m_histogram->setMode(mode == 1   ? HistogramChart::Mode::Weights
                         : mode == 2 ? HistogramChart::Mode::Activations
                                     : HistogramChart::Mode::Error);
    if (!m_histogramLayer.isEmpty())
        m_histogram->setLayer(m_histogramLayer);
}

} // namespace bitlens::widgets
