#pragma once
// The "Plan" tab: memory per part for inference, fine-tuning, LoRA or QLoRA of a language model,
// and how many accelerators of a kind hold it. The tab gathers the inputs (a preset, a
// config.json or the open model; precisions; use; batch and context; the card) and shows what
// core's analysis::computePlan returns: a table of parts with the formula behind each, the GPU
// count, the decode tokens/s bound, $ per TFLOP, and a stacked bar chart against the card's
// memory. The computation is arithmetic (microseconds), so it runs on the GUI thread.

#include "analysis/planner.h"
#include "chart_base.h"

#include <QString>
#include <QWidget>

#include <optional>
#include <vector>

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QStackedBarSeries;
class QLineSeries;
class QTableWidget;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// Stacked bars of a plan's parts: one card's share at the fewest cards that hold the plan and
/// at the tensor-parallel size (an even split), with a line at the card's memory.
class PlanChart : public ChartBase {
    Q_OBJECT

public:
    explicit PlanChart(QWidget* parent = nullptr);
    /// Draws `plan` for `card`; "No data" with `message` when there is no plan.
    void setPlan(const analysis::Plan& plan, const analysis::Accelerator& card);
    void clearPlan(const QString& message);
    QStackedBarSeries* barSeries() const { return m_bars; }
    QLineSeries* memoryLine() const { return m_line; }

private:
    QStackedBarSeries* m_bars = nullptr;
    QLineSeries* m_line = nullptr;
};

/// The Plan tab.
class PlanView : public QWidget {
    Q_OBJECT

public:
    explicit PlanView(QWidget* parent = nullptr);
    ~PlanView() override;

    /// The model the main window has open: its path (for a config.json beside it) and its
    /// parameter count. Adds "Open model" to the model choices.
    void setOpenModel(const QString& path, qint64 params);

    // Inputs, as a user would set them (each recomputes the plan). False for an unknown name.
    bool setPreset(const QString& name);
    bool setConfigPath(const QString& path);
    bool useOpenModel();
    bool setWeightPrecision(const QString& name);
    bool setKvPrecision(const QString& name);
    bool setActivationPrecision(const QString& name);
    bool setUse(const QString& name);
    void setBatch(int batch);
    void setContext(int context);
    bool setCard(const QString& id);
    /// Reads another accelerators file (BadInput shown in the tab, the old cards kept).
    bool loadCards(const QString& path);

    /// The last plan (nullopt when the inputs gave an error, see errorText()).
    const std::optional<analysis::Plan>& plan() const { return m_plan; }
    /// The GPU count line as shown ("8 x NVIDIA A100 80GB SXM (tensor parallel 8, ...").
    QString gpuText() const;
    QString decodeText() const;
    QString priceText() const;
    QString errorText() const;
    QTableWidget* partsTable() const { return m_parts; }
    PlanChart* chart() const { return m_chart; }
    QComboBox* modelCombo() const { return m_model; }
    QComboBox* cardCombo() const { return m_card; }

public Q_SLOTS:
    /// Computes the plan from the inputs and shows it.
    void recompute();

private:
    void chooseConfig();
    void chooseCards();
    void fillCards();
    Result<analysis::ModelShape> modelShape() const;

    std::vector<analysis::Accelerator> m_cards;
    QString m_cardsPath;
    QString m_openModelPath;
    qint64 m_openModelParams = 0;
    std::optional<analysis::Plan> m_plan;
    bool m_updating = false;

    QComboBox* m_model = nullptr;
    QLineEdit* m_configPath = nullptr;
    QPushButton* m_browse = nullptr;
    QComboBox* m_weights = nullptr;
    QComboBox* m_kv = nullptr;
    QComboBox* m_act = nullptr;
    QComboBox* m_use = nullptr;
    QSpinBox* m_batch = nullptr;
    QSpinBox* m_context = nullptr;
    QSpinBox* m_rank = nullptr;
    QCheckBox* m_checkpointing = nullptr;
    QComboBox* m_card = nullptr;
    QPushButton* m_cardsButton = nullptr;
    QLabel* m_gpu = nullptr;
    QLabel* m_decode = nullptr;
    QLabel* m_price = nullptr;
    QLabel* m_notes = nullptr;
    QLabel* m_error = nullptr;
    QTableWidget* m_parts = nullptr;
    PlanChart* m_chart = nullptr;
};

} // namespace bitlens::widgets
